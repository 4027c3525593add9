package fleet

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// capacitySLO is the embedded scenario's SLO.
var capacitySLO = scenario.SLO{TTFT: params.Duration(2 * time.Second), ITL: params.Duration(100 * time.Millisecond), Attainment: 0.99}

// lognormalMix draws n requests of mean in and out tokens, spread as the
// simulator's synthetic traffic is (sigma 0.8).
func lognormalMix(n int, in, out float64) Mix {
	rng := rand.New(rand.NewPCG(3, 4))
	draw := func(mean float64) int32 {
		return int32(max(1, math.Round(math.Exp(math.Log(mean)-0.32+0.8*rng.NormFloat64()))))
	}
	m := make(Mix, n)
	for i := range m {
		m[i] = trace.Request{Input: draw(in), Output: draw(out)}
	}
	return m
}

// The rate at the SLO is where the share of requests within both targets
// crosses the attainment: met there, missed a few percent above it.
func TestRateAtSLO(t *testing.T) {
	h100 := scenario.DefaultScenario().Variants[1].Server
	require.Equal(t, int32(8192), h100.MaxNumBatchedTokens, "the embedded H100")
	for _, tc := range []struct {
		name   string
		mix    Mix
		lo, hi float64 // where the rate must lie, req/s
	}{
		// Decode-bound: answers long against their prompts.
		{"long answers", Mix{{Input: 200, Output: 800}}, 1, 40},
		// Prefill-heavy: a step that computes a whole prompt is longer
		// than the ITL target, and short answers decoding through a few
		// of them miss.
		{"chat mix", lognormalMix(5000, 1000, 200), 3, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, err := RateAtSLO(h100, tc.mix, capacitySLO, 1)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, at.SLOMet, capacitySLO.Attainment)
			assert.Greater(t, at.RequestRate, tc.lo)
			assert.Less(t, at.RequestRate, tc.hi)
			above, err := BenchReplicaSLO(h100, tc.mix, capacitySLO, 1.05*at.RequestRate, 1)
			require.NoError(t, err)
			assert.Less(t, above.SLOMet, capacitySLO.Attainment, "5%% above the rate at the SLO")
		})
	}
}

// Requests whose prompts take a step longer than the ITL target spread
// the requests' TPOT: the replica's rate at the SLO is where their mean ITL
// is well under the target, and the same tokens in longer answers decode
// at a higher rate per token.
func TestRateAtSLOSpreadOfPrefillHeavyTraffic(t *testing.T) {
	h100 := scenario.DefaultScenario().Variants[1].Server
	at, err := RateAtSLO(h100, lognormalMix(5000, 1200, 150), capacitySLO, 1)
	require.NoError(t, err)
	assert.Less(t, at.ITLMs, 0.6*float64(capacitySLO.ITL.D().Milliseconds()), "mean ITL at the SLO")
	assert.Greater(t, at.TPOTP99Ms, 2*at.ITLMs, "the requests' TPOT spreads far above the mean")
}

// The share met falls as the rate rises: every rate draws the same
// requests and arrivals, scaled.
func TestBenchReplicaSLOFallsWithTheRate(t *testing.T) {
	l40s := scenario.DefaultScenario().Variants[0].Server
	mix := lognormalMix(2000, 1000, 200)
	prev := 1.0
	for _, rate := range []float64{1, 2, 3, 4, 5, 6} {
		p, err := BenchReplicaSLO(l40s, mix, capacitySLO, rate, 1)
		require.NoError(t, err)
		assert.LessOrEqual(t, p.SLOMet, prev+1e-3, "rate %v", rate)
		assert.InDelta(t, 1, p.SLOMet+max(p.OverTTFT, p.OverITL), min(p.OverTTFT, p.OverITL)+1e-9, "rate %v: a request is met or over a target", rate)
		prev = p.SLOMet
	}
	light, err := BenchReplicaSLO(l40s, mix, capacitySLO, 0.05, 1)
	require.NoError(t, err)
	assert.Equal(t, 1.0, light.SLOMet, "alone, every request meets the SLO")
	over, err := BenchReplicaSLO(l40s, mix, capacitySLO, 20, 1)
	require.NoError(t, err)
	assert.Greater(t, over.OverTTFT, 0.5, "far past its capacity the queue holds most requests past the TTFT target")
}

func TestCapacityErrors(t *testing.T) {
	spec := scenario.DefaultScenario().Variants[0].Server
	mix := Mix{{Input: 100, Output: 100}}
	for _, rate := range []float64{0, -1, math.NaN(), 2 * MaxBenchRate} {
		_, err := BenchReplicaSLO(spec, mix, capacitySLO, rate, 1)
		assert.ErrorContains(t, err, "request rate")
	}
	_, err := BenchReplicaSLO(spec, nil, capacitySLO, 1, 1)
	assert.ErrorContains(t, err, "no request of the mix fits")

	// An ITL target no step can meet: not met at any rate.
	tight := capacitySLO
	tight.ITL = params.Duration(time.Millisecond)
	_, err = RateAtSLO(spec, mix, tight, 1)
	assert.ErrorContains(t, err, "not met")

	_, err = CapacityScenario(scenario.DefaultScenario(), "nope", mix, nil)
	assert.ErrorContains(t, err, `no variant "nope"`)
}

// A request over one replica's KV cache is left out of its benchmark and
// counted, as vLLM refuses a request over its max model length.
func TestCapacityScenarioLeavesOutWhatDoesNotFit(t *testing.T) {
	sc := scenario.DefaultScenario()
	h100 := sc.Variants[1].Server
	tooLong := int32(h100.KVCapacityTokens()) + 1
	mix := Mix{{Input: 500, Output: 200}, {Input: tooLong, Output: 10}, {Input: 800, Output: 100}}
	rep, err := CapacityScenario(sc, "llama-70b-h100", mix, []float64{1, 2})
	require.NoError(t, err)
	require.Len(t, rep.Variants, 1)
	v := rep.Variants[0]
	assert.Equal(t, "llama-70b-h100", v.Name)
	assert.Equal(t, 1, v.Refused)
	assert.Equal(t, 3, rep.Requests)
	require.Len(t, v.Points, 2)
	assert.Equal(t, []float64{1, 2}, []float64{v.Points[0].RequestRate, v.Points[1].RequestRate})
	assert.GreaterOrEqual(t, v.AtSLO.SLOMet, sc.SLO.Attainment)
	assert.Greater(t, v.AtSLO.RequestRate, 2.0)
}

// A request of one output token has no time per output token: it meets
// the ITL target and stays out of the ITL figures.
func TestBenchReplicaSLOOneTokenAnswers(t *testing.T) {
	h100 := scenario.DefaultScenario().Variants[1].Server
	one, err := BenchReplicaSLO(h100, Mix{{Input: 500, Output: 1}}, capacitySLO, 1, 1)
	require.NoError(t, err)
	assert.Equal(t, 1.0, one.SLOMet)
	assert.Zero(t, one.ITLMs)
	assert.Zero(t, one.TPOTP99Ms)
	half, err := BenchReplicaSLO(h100, Mix{{Input: 500, Output: 1}, {Input: 500, Output: 100}}, capacitySLO, 1, 1)
	require.NoError(t, err)
	alone, err := BenchReplicaSLO(h100, Mix{{Input: 500, Output: 100}}, capacitySLO, 0.5, 1)
	require.NoError(t, err)
	assert.InEpsilon(t, alone.ITLMs, half.ITLMs, 0.2, "the mean ITL is the longer answers' alone, not halved by the one-token ones")
}
