package scenario

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
)

// TestScenarioBounds: every hostile value of the security review is refused
// by Validate, naming the field, before any work is allocated.
func TestScenarioBounds(t *testing.T) {
	hours := func(h float64) params.Duration { return params.Duration(time.Duration(h * float64(time.Hour))) }
	syn := func(sc *Scenario) *Synthetic { return sc.Traffic.Synthetic }
	for _, tt := range []struct {
		name  string
		edit  func(sc *Scenario)
		field string
		want  string
	}{
		{"huge alpha", func(sc *Scenario) { sc.Variants[1].Server.Alpha = 1e300 },
			"variants[1].server.alpha", "variants[1].server.alpha: 1e+300 ms is outside [0.01 ms, 60000 ms]"},
		{"tiny alpha", func(sc *Scenario) { sc.Variants[1].Server.Alpha = 1e-300 }, "variants[1].server.alpha", "1e-300 ms is outside"},
		{"huge beta", func(sc *Scenario) { sc.Variants[0].Server.Beta = 1e9 }, "variants[0].server.beta", "1000000000 ms is outside [0 ms, 100 ms]"},
		{"NaN gamma", func(sc *Scenario) { sc.Variants[0].Server.Gamma = math.NaN() }, "variants[0].server.gamma", "NaN ms is outside"},
		{"KV blocks", func(sc *Scenario) { sc.Variants[0].Server.NumGPUBlocks = math.MaxInt32 }, "variants[0].server.numGPUBlocks", "2147483647 is outside [1, 1000000]"},
		{"block size", func(sc *Scenario) { sc.Variants[0].Server.BlockSize = 1 << 20 }, "variants[0].server.blockSize", "outside [1, 1024]"},
		{"max-num-seqs", func(sc *Scenario) { sc.Variants[0].Server.MaxNumSeqs = math.MaxInt32 }, "variants[0].server.maxNumSeqs", "outside [1, 100000]"},
		{"batched tokens", func(sc *Scenario) { sc.Variants[0].Server.MaxNumBatchedTokens = math.MaxInt32 }, "variants[0].server.maxNumBatchedTokens", "outside [1, 10000000]"},
		{"cost 1e308", func(sc *Scenario) { sc.Variants[1].Cost = 1e308 }, "variants[1].cost", "variants[1].cost: 1e+308 is outside [0, 1000000]"},
		{"int32-max replicas", func(sc *Scenario) { sc.Variants[0].MaxReplicas = math.MaxInt32 }, "variants[0].maxReplicas", "2147483647 is outside [1, 1000]"},
		{"100k initial replicas", func(sc *Scenario) { sc.Variants[0].InitialReplicas = 100_000 }, "variants[0].initialReplicas", "100000 is outside [1, 24]"},
		{"negative minimum", func(sc *Scenario) { sc.Variants[1].MinReplicas = -1 }, "variants[1].minReplicas", "-1 is outside [0, 12]"},
		{"long start-up", func(sc *Scenario) { sc.Variants[0].StartupDelay = hours(100000) }, "variants[0].startupDelay", "100000h0m0s is outside [0s, 24h0m0s]"},
		{"1ns TTFT", func(sc *Scenario) { sc.SLO.TTFT = 1 }, "slo.ttft", "slo.ttft: 1ns is outside [1ms, 1h0m0s]"},
		{"long ITL", func(sc *Scenario) { sc.SLO.ITL = hours(100000) }, "slo.itl", "100000h0m0s is outside"},
		{"NaN attainment", func(sc *Scenario) { sc.SLO.Attainment = math.NaN() }, "slo.attainment", "NaN is outside (0, 1]"},
		{"1ns scrape", func(sc *Scenario) { sc.Control.ScrapeInterval = 1 }, "control.scrapeInterval", "1ns is outside [1s, 10m0s]"},
		{"1ns engine", func(sc *Scenario) { sc.Control.EngineInterval = 1 }, "control.engineInterval", "1ns is outside [1s, 1h0m0s]"},
		{"1ns HPA", func(sc *Scenario) { sc.Control.HPASyncPeriod = 1 }, "control.hpaSyncPeriod", "1ns is outside [1s, 1h0m0s]"},
		{"1ns oracle", func(sc *Scenario) { sc.Control.OracleInterval = 1 }, "control.oracleInterval", "1ns is outside [10s, 1h0m0s]"},
		{"long window", func(sc *Scenario) { sc.Control.MetricsWindow = hours(100000) }, "control.metricsWindow", "is outside [15s, 1h0m0s]"},
		{"long grace", func(sc *Scenario) { sc.Control.TerminationGrace = hours(100000) }, "control.terminationGrace", "is outside [1s, 1h0m0s]"},
		{"long warm-up", func(sc *Scenario) { sc.Control.Warmup = hours(100000) }, "control.warmup", "100000h0m0s is outside [0s, 24h0m0s]"},
		{"long traffic", func(sc *Scenario) { syn(sc).Duration = hours(100000) }, "traffic.synthetic.duration", "100000h0m0s is outside [1s, 744h0m0s]"},
		{"1e9 base rate", func(sc *Scenario) { syn(sc).BaseRate = 1e9 }, "traffic.synthetic.baseRate", "1000000000 req/s is outside [0 req/s, 100000 req/s]"},
		{"1e9 peak rate", func(sc *Scenario) { syn(sc).PeakRate = 1e9 }, "traffic.synthetic.peakRate", "1000000000 req/s is outside [6 req/s, 100000 req/s]"},
		{"requests", func(sc *Scenario) { syn(sc).PeakRate, syn(sc).Duration = 1000, hours(24) },
			"traffic.synthetic", "1000 req/s for 24h0m0s is 8.64e+07 requests: at most 1000000"},
		{"sigma 1e6", func(sc *Scenario) { syn(sc).Sigma = 1e6 }, "traffic.synthetic.sigma", "1000000 is outside [0, 2]"},
		{"input tokens", func(sc *Scenario) { syn(sc).InputTokens = 1e12 }, "traffic.synthetic.inputTokens", "outside [1, 10000000]"},
		{"max output", func(sc *Scenario) { syn(sc).MaxOutputTokens = math.MaxInt32 }, "traffic.synthetic.maxOutputTokens", "outside [0, 10000000]"},
		{"rate scale", func(sc *Scenario) { sc.Traffic.RateScale = 1e6 }, "traffic.rateScale", "1000000 is outside (0, 1000]"},
		{"time scale", func(sc *Scenario) { sc.Traffic.TimeScale = 1e-9 }, "traffic.timeScale", "1e-09 is outside [0.001, 1000]"},
		{"limit", func(sc *Scenario) { sc.Traffic.Limit = hours(100000) }, "traffic.limit", "outside [0s, 744h0m0s]"},
		{"queue threshold", func(sc *Scenario) { sc.Policies.V1.QueueLengthThreshold = math.Inf(1) }, "policies.v1.queueLengthThreshold", "+Inf is outside (0, 1000000]"},
		{"queue target", func(sc *Scenario) { sc.Policies.QueueThreshold.TargetWaitingPerReplica = 1e300 }, "policies.queueThreshold.targetWaitingPerReplica", "outside (0, 1000000]"},
		{"kpa target", func(sc *Scenario) { sc.Policies.KPA.TargetConcurrency = 1e300 }, "policies.kpa.targetConcurrency", "outside [0, 1000000]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := DefaultScenario()
			tt.edit(&sc)
			err := sc.Validate()
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			assert.Equal(t, tt.field, fe.Field)
		})
	}
}

// TestShippedScenariosValidate loads every scenario the repository ships,
// and its traffic.
func TestShippedScenariosValidate(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		sc, err := LoadScenario(f)
		require.NoError(t, err, f)
		if sc.Traffic.Trace != "" {
			_, err := os.Stat(sc.Traffic.Trace)
			require.NoError(t, err, f)
		}
		tr, err := sc.LoadTraffic()
		require.NoError(t, err, f)
		assert.NotEmpty(t, tr.Requests, f)
	}
}

func TestStepMs(t *testing.T) {
	additive := ServerSpec{Alpha: 18, Beta: 0.08, Gamma: 2e-5}
	roofline := ServerSpec{Overhead: 2.5, Alpha: 16, Beta: 0.09, Gamma: 1e-5}
	for _, tc := range []struct {
		name        string
		spec        ServerSpec
		batched, kv int64
		want        float64
	}{
		{"additive sums the costs", additive, 5000, 5000, 18 + 400 + 0.1},
		{"additive decode", additive, 1, 1000, 18 + 0.08 + 0.02},
		{"roofline prompt is compute-bound", roofline, 5000, 5000, 2.5 + 450},
		{"roofline decode is memory-bound", roofline, 50, 100_000, 2.5 + 16 + 1},
		{"roofline small prompt: the weights' read", roofline, 100, 0, 2.5 + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, tc.spec.StepMs(tc.batched, tc.kv), 1e-9)
		})
	}
	bad := roofline
	bad.Overhead = -1
	assert.ErrorContains(t, bad.Validate(), "server.overhead")
}
