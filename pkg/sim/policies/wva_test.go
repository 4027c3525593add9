package policies

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

// TestWVAInputsAndState checks the input path: decide.BuildPlans, fed the
// inventory's targets and the collector's result and nothing added after,
// gives the group what the token and queueing analyzers read, and the
// queueing analyzer's memory comes back every cycle.
func TestWVAInputsAndState(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSteady, 15*time.Minute, 3, 3)
	sc.Policies.WVA.ConfigMaps = map[string]map[string]string{
		config.QueueingModelConfigMapName: {"default": "targetTTFT: 1000\ntargetITL: 60"},
	}
	p, err := NewWVA(&sc)
	require.NoError(t, err)
	assert.Equal(t, params.AnalyzerQueueingModel, p.analyzer)
	cycles := 0
	var last decide.GroupResult
	p.observe = func(_ time.Duration, res []decide.GroupResult) {
		cycles++
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		last = res[0]
	}
	f := fleet.New(&sc, &tr, p, []int32{3, 0})
	var seen decision.Group
	f.SetProgress(func(now, _ time.Duration) {
		if now == 10*time.Minute {
			views, metrics := p.collect(f)
			plans := decide.BuildPlans(views, metrics, nil, p.resolve)
			require.Len(t, plans, 1)
			seen = plans[0].Input.Group
		}
	})
	f.Run()
	assert.Greater(t, cycles, 20)
	require.NotNil(t, last.State, "the analyzer's state is carried")
	require.NotEmpty(t, seen.Replicas)
	require.Len(t, seen.Variants, 2)
	byName := map[string]decision.Variant{}
	for _, v := range seen.Variants {
		byName[v.Name] = v
	}
	v := byName[sc.Variants[0].Name]
	assert.Equal(t, int64(sc.Variants[0].Server.MaxNumSeqs), v.MaxNumSeqs)
	assert.Equal(t, int64(sc.Variants[0].Server.MaxNumBatchedTokens), v.MaxNumBatchedTokens)
	assert.Equal(t, sc.Variants[0].StartupDelay.D(), v.StartupDelay, "measured on the pods present from the start")
	assert.Zero(t, byName[sc.Variants[1].Name].StartupDelay, "no Ready pod, no measurement")
	var arrival float64
	for _, r := range seen.Replicas {
		assert.Equal(t, int64(sc.Variants[0].Server.NumGPUBlocks), r.NumGPUBlocks)
		assert.Equal(t, int64(16), r.BlockSize)
		assert.InDelta(t, 1000, r.AvgInputTokens, 400)
		assert.InDelta(t, 200, r.AvgOutputTokens, 100)
		assert.Positive(t, r.AvgTTFTms)
		assert.Positive(t, r.AvgITLms)
		arrival += r.ArrivalRate
	}
	assert.InDelta(t, 3, arrival, 1.2, "the pods' arrival rates add up to the load")
	assert.True(t, seen.GatewayArrivalsReported)
	assert.InDelta(t, 3, seen.GatewayArrivalRate, 1.2, "the gateway counts the load")
	assert.Zero(t, seen.SchedulerQueueSize, "three replicas hold 3 req/s: flow control holds nothing")
}

// TestStartupDelayMeasured checks the inventory's measurement on simulated
// pods: the median creation-to-Ready time, 0 without a Ready pod.
func TestStartupDelayMeasured(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods [][2]time.Duration // created, readyAt
		want time.Duration
	}{
		{"none", nil, 0},
		{"started before the run", [][2]time.Duration{{-7 * time.Minute, 0}}, 7 * time.Minute},
		{"median", [][2]time.Duration{{0, 2 * time.Minute}, {time.Minute, 2 * time.Minute}, {time.Minute, 5 * time.Minute}}, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ready []readyPod
			for i, c := range tc.pods {
				ready = append(ready, readyPod{name: fmt.Sprintf("p-%d", i), created: c[0], readyAt: c[1]})
			}
			assert.Equal(t, tc.want, startupDelay(ready))
		})
	}
}

func TestParsePolicies(t *testing.T) {
	got, err := ParsePolicies(" wva, oracle,wva ")
	require.NoError(t, err)
	assert.Equal(t, []string{PolicyWVA, PolicyOracle}, got)
	_, err = ParsePolicies("wva,hpa")
	assert.ErrorContains(t, err, `unknown policy "hpa"`)
	_, err = ParsePolicies(",")
	assert.ErrorContains(t, err, "no policy given")
}

// The scenario states the SLO once: moving slo (as --slo-ttft and
// --slo-itl do) moves wva's targets with the yardstick, and an entry that
// restates a different target is an error, not a second SLO.
func TestWVATargetsAreTheScenarioSLO(t *testing.T) {
	sc := scenario.DefaultScenario()
	sc.SLO.TTFT, sc.SLO.ITL = params.Duration(time.Second), params.Duration(50*time.Millisecond)
	p, err := NewWVA(&sc)
	require.NoError(t, err)
	r := p.resolve(sc.ModelID, sc.Namespace)
	assert.Equal(t, 1000.0, r.SLO.TargetTTFTms)
	assert.Equal(t, 50.0, r.SLO.TargetITLms)
	assert.Equal(t, sc.SLO.Attainment, r.SLO.Attainment)

	cases := []struct {
		name, entry, err string
		attainment       float64
	}{
		{"no target in the entry", "analyzerName: slo-planner", "", 0.99},
		{"same targets restated", "targetTTFT: 1000\ntargetITL: 50", "", 0.99},
		{"wva's own attainment", "sloAttainment: 0.95", "", 0.95},
		{"conflicting TTFT", "targetTTFT: 2000", `wva-saturation-scaling-config "default": targetTTFT 2000 conflicts with slo.ttft 1s: ` +
			"the scenario states the SLO once, in slo.ttft (drop targetTTFT from the entry)", 0},
		{"conflicting ITL", "targetITL: 100", "targetITL 100 conflicts with slo.itl 50ms", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sc
			s.Policies.WVA.ConfigMaps = map[string]map[string]string{config.SaturationConfigMapName: {config.DefaultKey: tc.entry}}
			r, err := s.WVAResolved()
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				assert.ErrorContains(t, s.Validate(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 1000.0, r.SLO.TargetTTFTms)
			assert.Equal(t, tc.attainment, r.SLO.Attainment)
		})
	}

	// An attainment wva cannot plan for is rejected as the ConfigMap's would be.
	sc.SLO.Attainment = 1
	sc.Policies.WVA.ConfigMaps = nil
	assert.ErrorContains(t, sc.Validate(), "sloAttainment=1: must be in [0.5, 0.9999]")
}

// readyPod is a Ready pod as startupDelay reads it.
type readyPod struct {
	name             string
	created, readyAt time.Duration
}

func (p readyPod) Name() string           { return p.name }
func (p readyPod) Created() time.Duration { return p.created }
func (p readyPod) ReadyAt() time.Duration { return p.readyAt }
