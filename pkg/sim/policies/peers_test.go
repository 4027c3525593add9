package policies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
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
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 30*time.Minute, 1.5, 6)
	f := fleet.New(&sc, &tr, newKPAPolicy(&sc), []int32{1, 0})
	f.Run()
	before, during := peakAround(f.Summarize().Timeline, 10*time.Minute, time.Minute)
	t.Logf("replicas: at most %d before the spike, %d in its first minute", before, during)
	assert.Greater(t, during, before)
	s := f.Summarize()
	assert.Greater(t, s.ScaleEvents, 0)
	assert.Zero(t, s.Unfinished)
}

func TestKPAConfig(t *testing.T) {
	sc := scenario.DefaultScenario()
	assert.InDelta(t, 0.7, sc.Policies.KPA.TargetUtilization, 1e-12)
	// The default target is half of each variant's --max-num-seqs.
	assert.InDelta(t, 128*0.7, perPodTarget(sc.Policies.KPA, sc.Variants[0]), 1e-9)
	assert.InDelta(t, 128*0.7, perPodTarget(sc.Policies.KPA, sc.Variants[1]), 1e-9)
	for _, tt := range []struct {
		cfg  scenario.KPAConfig
		want string
	}{
		{scenario.KPAConfig{TargetConcurrency: -1, TargetUtilization: 0.7}, "kpa.targetConcurrency: -1 is outside [0, 1000000]"},
		{scenario.KPAConfig{TargetConcurrency: 10, TargetUtilization: 1.5}, "kpa.targetUtilization: 1.5 is outside (0, 1]"},
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
