package sim

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestKPADecide drives the KPA decision function through sequences of
// 2 s decisions. Target 10 requests per pod (target x utilization).
func TestKPADecide(t *testing.T) {
	type step struct {
		at             time.Duration
		stable, panicC float64
		ready, current int32
		want           int32
	}
	p := kpaParams{target: 10, min: 0, max: 50}
	for _, tt := range []struct {
		name   string
		params kpaParams
		steps  []step
	}{
		{name: "stable: ceil(concurrency / target)", params: p, steps: []step{
			{at: 0, stable: 41, panicC: 41, ready: 4, current: 4, want: 5},
			{at: 2 * time.Second, stable: 30, panicC: 30, ready: 5, current: 5, want: 3},
		}},
		{name: "panic window 2x the ready pods: scale on the panic window", params: p, steps: []step{
			{at: 0, stable: 40, panicC: 100, ready: 5, current: 5, want: 10},
		}},
		{name: "panic count 9 < 2x 5 ready: stable", params: p, steps: []step{
			{at: 0, stable: 40, panicC: 90, ready: 5, current: 5, want: 4},
		}},
		{name: "in panic, never down; out of panic 60 s after the last over-threshold", params: p, steps: []step{
			{at: 0, stable: 40, panicC: 200, ready: 5, current: 5, want: 20},
			{at: 2 * time.Second, stable: 50, panicC: 120, ready: 5, current: 20, want: 20},  // still over: 12/5
			{at: 4 * time.Second, stable: 50, panicC: 30, ready: 5, current: 20, want: 20},   // under, but in panic
			{at: 62 * time.Second, stable: 30, panicC: 30, ready: 20, current: 20, want: 20}, // 60 s after: still (not past)
			{at: 64 * time.Second, stable: 90, panicC: 30, ready: 20, current: 20, want: 10}, // past 60 s: stable, at most halved
		}},
		{name: "panic takes the stable count when it is higher", params: p, steps: []step{
			{at: 0, stable: 160, panicC: 110, ready: 5, current: 5, want: 16},
		}},
		{name: "scale down at most 2x per decision", params: p, steps: []step{
			{at: 0, stable: 5, panicC: 5, ready: 8, current: 8, want: 4},
			{at: 2 * time.Second, stable: 5, panicC: 5, ready: 4, current: 4, want: 2},
			{at: 4 * time.Second, stable: 5, panicC: 5, ready: 2, current: 2, want: 1},
		}},
		{name: "scale down rate counts ready pods, not spec", params: p, steps: []step{
			{at: 0, stable: 5, panicC: 5, ready: 3, current: 8, want: 1},
		}},
		{name: "to zero only after 30 s of grace", params: p, steps: []step{
			{at: 0, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
			{at: 28 * time.Second, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
			{at: 30 * time.Second, stable: 0, panicC: 0, ready: 1, current: 1, want: 0},
		}},
		{name: "traffic during the grace resets it", params: p, steps: []step{
			{at: 0, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
			{at: 20 * time.Second, stable: 1, panicC: 1, ready: 1, current: 1, want: 1},
			{at: 40 * time.Second, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
			{at: 70 * time.Second, stable: 0, panicC: 0, ready: 1, current: 1, want: 0},
		}},
		{name: "min-scale holds a replica", params: kpaParams{target: 10, min: 1, max: 50}, steps: []step{
			{at: 0, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
			{at: time.Minute, stable: 0, panicC: 0, ready: 1, current: 1, want: 1},
		}},
		{name: "max-scale caps the panic", params: kpaParams{target: 10, min: 0, max: 12}, steps: []step{
			{at: 0, stable: 40, panicC: 500, ready: 2, current: 2, want: 12},
		}},
		{name: "from zero ready pods: counted as one", params: p, steps: []step{
			{at: 0, stable: 10, panicC: 35, ready: 0, current: 1, want: 4},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newKPAState()
			for i, s := range tt.steps {
				got := kpaDecide(tt.params, &st, s.at, s.stable, s.panicC, s.ready, s.current)
				assert.Equal(t, s.want, got, "step %d at %s", i, s.at)
			}
		})
	}
}

// TestKPAScalesUpUnderSpike: on the spike (1.5 -> 6 req/s at minute 10
// for 5 minutes) the KPA adds replicas within a minute of its start and
// holds more during the spike than before it.
func TestKPAScalesUpUnderSpike(t *testing.T) {
	sc, tr := shortScenario(t, scenario.ShapeSpike, 30*time.Minute, 1.5, 6)
	f := fleet.New(&sc, &tr, newKPAPolicy(&sc), []int32{1, 0})
	f.Run()
	before, during := peakAround(f.Summarize().Timeline, 10*time.Minute, time.Minute)
	t.Logf("replicas: at most %d before the spike, %d in its first minute", before, during)
	assert.Greater(t, during, before)
	s := summarize(PolicyKPA, f)
	assert.Greater(t, s.ScaleEvents, 0)
	assert.Zero(t, s.Unfinished)
}

// TestStaticFrontier: the rows are named static:<n>x<variant>+<m>x<variant>,
// constant, at most frontierMaxRows, within 1.5x static-peak's cost, and
// their costs increase along the frontier.
func TestStaticFrontier(t *testing.T) {
	sc, tr := shortScenario(t, scenario.ShapeBursty, 15*time.Minute, 1.5, 5)
	rep, err := Run(sc, tr, Options{Policies: []string{PolicyStaticPeak, PolicyStaticFrontier}})
	require.NoError(t, err)
	require.Equal(t, PolicyStaticPeak, rep.Policies[0].Policy)
	peak := rep.Policies[0].Cost
	rows := rep.Policies[1:]
	require.GreaterOrEqual(t, len(rows), 3)
	assert.LessOrEqual(t, len(rows), frontierMaxRows)
	name := regexp.MustCompile(`^static:(\d+)x` + regexp.QuoteMeta(sc.Variants[0].Name) + `\+(\d+)x` + regexp.QuoteMeta(sc.Variants[1].Name) + `$`)
	for i, r := range rows {
		assert.Regexp(t, name, r.Policy)
		assert.Zero(t, r.ScaleEvents, r.Policy)
		assert.LessOrEqual(t, r.Cost, frontierCostFactor*peak+1e-9, r.Policy)
		if i > 0 {
			assert.Greater(t, r.Cost, rows[i-1].Cost, "%s after %s", r.Policy, rows[i-1].Policy)
		}
	}
	// More capacity costs more: the most expensive row meets the SLO at
	// least as well as the cheapest.
	assert.GreaterOrEqual(t, rows[len(rows)-1].SLOAttainment, rows[0].SLOAttainment)
}

// TestStaticFrontierIsTheCheapestPerCapacity checks the unthinned frontier
// against every mix: none costing as much or less has more capacity.
func TestStaticFrontierIsTheCheapestPerCapacity(t *testing.T) {
	sc := scenario.DefaultScenario()
	stats := trace.Stats{MeanInputTokens: 1000, MeanOutputTokens: 200}
	l40s, h100 := fleet.ServerThroughput(sc.Variants[0].Server, 1000, 200), fleet.ServerThroughput(sc.Variants[1].Server, 1000, 200)
	require.Greater(t, l40s, 0.0)
	require.Greater(t, h100, l40s, "the H100 serves more")
	const maxCost = 120
	front := staticFrontier(&sc, stats, maxCost, 0)
	require.NotEmpty(t, front)
	for i, m := range front {
		if i > 0 {
			assert.Greater(t, m.Cost, front[i-1].Cost)
			assert.Greater(t, m.Capacity, front[i-1].Capacity)
		}
		for a := sc.Variants[0].MinReplicas; a <= sc.Variants[0].MaxReplicas; a++ {
			for b := sc.Variants[1].MinReplicas; b <= sc.Variants[1].MaxReplicas; b++ {
				cost := mixCost(sc.Variants, []int32{a, b})
				if cost <= m.Cost && float64(a)*l40s+float64(b)*h100 > m.Capacity*(1+1e-9) {
					t.Errorf("%v (cost %g) has more capacity than frontier mix %v (cost %g)", []int32{a, b}, cost, m.Mix, m.Cost)
				}
			}
		}
	}
	assert.Len(t, staticFrontier(&sc, stats, maxCost, 5), 5)
	assert.Equal(t, "static:3xllama-70b-l40s+1xllama-70b-h100", frontierName(&sc, []int32{3, 1}))
}

func TestKPAConfig(t *testing.T) {
	sc := scenario.DefaultScenario()
	assert.InDelta(t, 0.7, sc.Policies.KPA.TargetUtilization, 1e-12)
	// The default target is half of each variant's --max-num-seqs.
	assert.InDelta(t, 64*0.7, perPodTarget(sc.Policies.KPA, sc.Variants[0]), 1e-9)
	assert.InDelta(t, 128*0.7, perPodTarget(sc.Policies.KPA, sc.Variants[1]), 1e-9)
	for _, tt := range []struct {
		cfg  scenario.KPAConfig
		want string
	}{
		{scenario.KPAConfig{TargetConcurrency: -1, TargetUtilization: 0.7}, "policies.kpa.targetConcurrency: -1 is outside [0, 1000000]"},
		{scenario.KPAConfig{TargetConcurrency: 10, TargetUtilization: 1.5}, "policies.kpa.targetUtilization: 1.5 is outside (0, 1]"},
	} {
		sc.Policies.KPA = tt.cfg
		assert.ErrorContains(t, sc.Validate(), tt.want)
	}
	sc.Policies.KPA = scenario.KPAConfig{TargetConcurrency: 20, TargetUtilization: 1}
	require.NoError(t, sc.Validate())
	assert.InDelta(t, 20, perPodTarget(sc.Policies.KPA, sc.Variants[1]), 1e-9)
}

// peakAround is the most replicas (all variants) held before start and in
// the window after it.
func peakAround(timeline []fleet.TimePoint, start, window time.Duration) (before, during int32) {
	for _, tp := range timeline {
		var total int32
		for _, r := range tp.Replicas {
			total += r
		}
		switch {
		case tp.At < start:
			before = max(before, total)
		case tp.At <= start+window:
			during = max(during, total)
		}
	}
	return before, during
}
