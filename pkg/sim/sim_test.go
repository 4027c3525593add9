package sim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
)

// shortScenario is the default scenario with a shorter synthetic trace.
func shortScenario(t testing.TB, shape string, d time.Duration, base, peak float64) (Scenario, Trace) {
	t.Helper()
	sc := DefaultScenario()
	syn := *sc.Traffic.Synthetic
	syn.Shape, syn.Duration, syn.BaseRate, syn.PeakRate = shape, config.Duration(d), base, peak
	sc.Traffic.Synthetic = &syn
	require.NoError(t, sc.Validate())
	tr, err := sc.LoadTraffic()
	require.NoError(t, err)
	return sc, tr
}

func TestDefaultScenario(t *testing.T) {
	sc := DefaultScenario()
	assert.Len(t, sc.Variants, 2)
	assert.Less(t, len(DefaultScenarioYAML), 200<<10)
	tr, err := sc.LoadTraffic()
	require.NoError(t, err)
	assert.InDelta(t, 60, tr.Duration().Minutes(), 1)
}

func TestDeterministic(t *testing.T) {
	sc, tr := shortScenario(t, ShapeBursty, 20*time.Minute, 2, 8)
	run := func(sc Scenario, tr Trace) ([]byte, []byte) {
		rep, err := Run(sc, tr, Options{})
		require.NoError(t, err)
		rep.Elapsed = 0
		summary, err := json.Marshal(rep)
		require.NoError(t, err)
		var timelines [][]TimePoint
		for _, p := range rep.Policies {
			timelines = append(timelines, p.Timeline)
		}
		tl, err := json.Marshal(timelines)
		require.NoError(t, err)
		return summary, tl
	}
	s1, t1 := run(sc, tr)
	s2, t2 := run(sc, tr)
	assert.JSONEq(t, string(s1), string(s2), "same seed, same summary")
	assert.Equal(t, string(t1), string(t2), "same seed, same timelines")

	sc.Seed++
	tr2, err := sc.LoadTraffic()
	require.NoError(t, err)
	s3, _ := run(sc, tr2)
	assert.NotEqual(t, string(s1), string(s3), "another seed, another trace")
}

// TestOracleIsALowerBound checks the oracle against every policy, and
// against a brute-force search over constant fleets: the cheapest fixed mix
// that meets the SLO in simulation must cost at least the oracle.
func TestOracleIsALowerBound(t *testing.T) {
	for _, shape := range []string{ShapeSteady, ShapeSpike, ShapeRamp} {
		t.Run(shape, func(t *testing.T) {
			sc, tr := shortScenario(t, shape, 20*time.Minute, 1.5, 5)
			rep, err := Run(sc, tr, Options{})
			require.NoError(t, err)
			var oracle float64
			for _, p := range rep.Policies {
				if p.Policy == PolicyOracle {
					oracle = p.Cost
				}
			}
			require.Positive(t, oracle)
			for _, p := range rep.Policies {
				if p.SLOAttainment >= sc.SLO.Attainment {
					assert.GreaterOrEqual(t, p.Cost, oracle-1e-9, "%s meets the SLO so it cannot beat the oracle", p.Policy)
				}
			}
			best := -1.0
			for a := sc.Variants[0].MinReplicas; a <= 6; a++ {
				for b := sc.Variants[1].MinReplicas; b <= 3; b++ {
					if a+b == 0 {
						continue
					}
					f := newFleet(&sc, &tr, staticPolicy{}, []int32{a, b})
					f.run()
					s := summarize("fixed", f)
					if s.SLOAttainment >= sc.SLO.Attainment && (best < 0 || s.Cost < best) {
						best = s.Cost
					}
				}
			}
			require.Positive(t, best, "some fixed fleet meets the SLO")
			assert.LessOrEqual(t, oracle, best, "oracle %.2f vs cheapest fixed fleet meeting the SLO %.2f", oracle, best)
		})
	}
}

func TestCheapestMix(t *testing.T) {
	vs := []VariantSpec{{Name: "a", Cost: 8, MaxReplicas: 10}, {Name: "b", Cost: 20, MaxReplicas: 4}}
	mix, ok := cheapestMix(vs, []float64{1, 3}, 2.5)
	assert.True(t, ok)
	assert.Equal(t, []int32{0, 1}, mix, "one b (20) covers 2.5 for less than three a (24)")
	mix, _ = cheapestMix(vs, []float64{1, 3}, 3)
	assert.Equal(t, []int32{0, 1}, mix)
	mix, ok = cheapestMix(vs, []float64{1, 3}, 100)
	assert.False(t, ok)
	assert.Equal(t, []int32{10, 4}, mix)
	vs[0].MinReplicas = 1
	mix, _ = cheapestMix(vs, []float64{1, 3}, 0)
	assert.Equal(t, []int32{1, 0}, mix, "minReplicas hold when idle")
}

func TestWVAUsesTheConfiguredAnalyzerAndConfig(t *testing.T) {
	sc, tr := shortScenario(t, ShapeSpike, 20*time.Minute, 1.5, 5)
	rep, err := Run(sc, tr, Options{Policies: []string{PolicyWVA, PolicyWVAV1}})
	require.NoError(t, err)
	assert.Equal(t, config.AnalyzerSaturationPercentage, rep.Analyzer)
	wva, v1 := rep.Policies[0], rep.Policies[1]
	assert.Positive(t, wva.ScaleEvents, "wva reacts to the spike")
	assert.Equal(t, v1.Cost, wva.Cost, "same algorithm and thresholds as the reference: same decisions")

	// Tighter thresholds in the ConfigMap change what the pipeline decides.
	sc.Policies.WVA.ConfigMaps = map[string]map[string]string{
		config.SaturationConfigMapName: {"default": "kvCacheThreshold: 0.4\nkvSpareTrigger: 0.1\nqueueLengthThreshold: 2\nqueueSpareTrigger: 1"},
	}
	rep2, err := Run(sc, tr, Options{Policies: []string{PolicyWVA}})
	require.NoError(t, err)
	assert.Greater(t, rep2.Policies[0].Cost, wva.Cost)

	sc.Policies.WVA.ConfigMaps = map[string]map[string]string{
		config.SaturationConfigMapName: {"default": "kvCacheThreshold: 1.5"},
	}
	_, err = Run(sc, tr, Options{Policies: []string{PolicyWVA}})
	assert.ErrorContains(t, err, "kvCacheThreshold=1.5")
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

func TestScenarioValidation(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want string
	}{
		{"variants: []\n", "variants: at least one variant"},
		{"variants: [{name: a, maxReplicas: 1, initialReplicas: 1, server: {alpha: 1, numGPUBlocks: 1}}]\nslo: {ttft: 1s, itl: 1s}\ntraffic: {}\n", "traffic: set trace"},
		{"variants: [{name: a, maxReplicas: 1, initialReplicas: 2, server: {alpha: 1, numGPUBlocks: 1}}]\n", "variants[0].initialReplicas 2"},
		{"variants: [{name: a, maxReplicas: 1, server: {alpha: 0, numGPUBlocks: 1}}]\n", "variants[0].server.alpha=0"},
		{"variantz: []\n", "unknown field"},
	} {
		_, err := ParseScenario([]byte(tt.yaml))
		assert.ErrorContains(t, err, tt.want, tt.yaml)
	}
}

func TestRender(t *testing.T) {
	sc, tr := shortScenario(t, ShapeSpike, 15*time.Minute, 1.5, 5)
	rep, err := Run(sc, tr, Options{})
	require.NoError(t, err)
	var text, html stringsBuilder
	require.NoError(t, RenderText(&text, rep))
	for _, want := range []string{"POLICY", "x ORACLE", "wva-v1", "queue-threshold", "static-peak", "oracle", "Replicas (all variants)", "W wva"} {
		assert.Contains(t, text.String(), want)
	}
	require.NoError(t, RenderHTML(&html, rep))
	out := html.String()
	assert.Contains(t, out, "<svg")
	assert.Contains(t, out, "TTFT p99")
	assert.NotContains(t, out, "<script")
	for _, external := range []string{"src=", "href=", "<link", "@import"} {
		assert.NotContains(t, out, external, "no external resources")
	}
	assert.Contains(t, out, `xmlns="http://www.w3.org/2000/svg"`)
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }

// BenchmarkSimulateHour simulates one hour of bursty traffic at five times
// the default scenario's rate (tens of replicas), every policy and the
// oracle, as `wva simulate` does.
func BenchmarkSimulateHour(b *testing.B) {
	sc := DefaultScenario()
	sc.Traffic.RateScale = 5
	tr, err := sc.LoadTraffic()
	require.NoError(b, err)
	b.ResetTimer()
	var steps int64
	for range b.N {
		rep, err := Run(sc, tr, Options{})
		require.NoError(b, err)
		steps = 0
		for _, p := range rep.Policies {
			steps += p.EngineSteps
		}
	}
	b.ReportMetric(float64(len(tr.Requests)), "requests")
	b.ReportMetric(float64(steps), "engine-steps")
}
