package planner

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func TestSaturationFloor(t *testing.T) {
	scaling := params.DefaultScaling()
	caps := map[string]ReplicaCapacity{"a": {Rate: 2}, "b": {Rate: 5}}
	ref := ReplicaCapacity{Rate: 2}
	hot := func(v string) decision.ReplicaMetrics { return decision.ReplicaMetrics{Variant: v, KvCacheUsage: 0.9} }
	queued := func(v string) decision.ReplicaMetrics { return decision.ReplicaMetrics{Variant: v, QueueLength: 6} }
	calm := func(v string) decision.ReplicaMetrics {
		return decision.ReplicaMetrics{Variant: v, KvCacheUsage: 0.5, QueueLength: 1}
	}
	// slow's requests (req/s in the 1m window) take 50 ms per token, or
	// 150 ms for a share of them.
	slow := func(v string, rate, share float64) decision.ReplicaMetrics {
		r := calm(v)
		r.TPOT = decision.Histogram{Bounds: []float64{0.05, 0.1, 0.15, math.Inf(1)}, Counts: []float64{rate * (1 - share), rate * (1 - share), rate, rate}}
		return r
	}
	// firstTokenLate's requests (req/s in the 1m window) wait ttftMs on
	// average for their first token.
	firstTokenLate := func(v string, rate, ttftMs float64) decision.ReplicaMetrics {
		r := calm(v)
		r.ArrivalRate, r.AvgTTFTms = rate, ttftMs
		return r
	}
	for _, tt := range []struct {
		name      string
		replicas  []decision.ReplicaMetrics
		floor     float64
		saturated int
		// settling: a variant gained ready replicas within the rate
		// window (the latency histograms predate them).
		settling bool
	}{
		{"none reporting", nil, 0, 0, false},
		{"all calm", []decision.ReplicaMetrics{calm("a"), calm("b")}, 0, 0, false},
		{"half saturated is not most", []decision.ReplicaMetrics{hot("a"), calm("b")}, 0, 1, false},
		{"most saturated: their supply and one more", []decision.ReplicaMetrics{hot("a"), queued("b"), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"queue alone saturates", []decision.ReplicaMetrics{queued("a")}, 2 + 2, 1, false},
		{"most over the ITL target", []decision.ReplicaMetrics{slow("a", 2, 0.2), slow("b", 5, 0.06), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"within five error budgets", []decision.ReplicaMetrics{slow("a", 2, 0.04), slow("b", 5, 0.04)}, 0, 0, false},
		{"too few requests to tell", []decision.ReplicaMetrics{slow("a", 0.1, 0.5)}, 0, 0, false},
		{"most over the TTFT target on average", []decision.ReplicaMetrics{firstTokenLate("a", 1, 2500), firstTokenLate("b", 1, 2100), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"TTFT within the target", []decision.ReplicaMetrics{firstTokenLate("a", 1, 1900), firstTokenLate("b", 1, 1500)}, 0, 0, false},
		{"too few first tokens to tell", []decision.ReplicaMetrics{firstTokenLate("a", 0.1, 9000)}, 0, 0, false},
		{"over the ITL target before new replicas served", []decision.ReplicaMetrics{slow("a", 2, 0.2), slow("b", 5, 0.06), calm("a")}, 0, 0, true},
		{"over the TTFT target before new replicas served", []decision.ReplicaMetrics{firstTokenLate("a", 1, 2500), firstTokenLate("b", 1, 2100)}, 0, 0, true},
		{"queues saturate while new replicas settle", []decision.ReplicaMetrics{hot("a"), queued("b"), slow("a", 2, 0.2)}, 2 + 5 + 2 + 2, 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			floor, n, _ := saturationFloor(decision.Group{Replicas: tt.replicas}, caps, ref, scaling, params.DefaultSLO(), !tt.settling)
			assert.InDelta(t, tt.floor, floor, 1e-9)
			assert.Equal(t, tt.saturated, n)
		})
	}
}

// Replicas mostly over the ITL target prove the capacity fitted too high:
// the floor they set orders at once and is held for a short hold, so the
// next calm cycle does not give the replicas back to order them again.
func TestSlowReplicasOrderAndHold(t *testing.T) {
	var st any
	l4 := int32(3)
	cycle := func(at time.Duration, over bool) (Analysis, int32) {
		g := fleet(l4, 0, 3)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		for i := range g.Replicas {
			if over {
				g.Replicas[i].TPOT = slow
			}
		}
		an, sig, next := run(t, g, st)
		st = next
		l4 = sig.PlannedReplicas["l4"]
		return an, l4
	}
	var calm int32
	for m := range 20 {
		_, calm = cycle(time.Duration(m)*time.Minute, false)
	}
	an, ordered := cycle(20*time.Minute, true)
	assert.Positive(t, an.SlowFloor)
	require.Positive(t, an.Reporting)
	assert.Equal(t, an.Reporting, an.Slow, "every replica is over the ITL target")
	assert.Greater(t, an.SlowFloor, an.Floor, "the floor is staffed with the margin")
	assert.Contains(t, an.Summary()[0], fmt.Sprintf("under the saturation floor %.3f req/s (%d of %[2]d reporting replicas saturated, %[2]d over the ITL target; held for a short hold)", an.Floor, an.Reporting))
	assert.Greater(t, ordered, calm, "half the requests over the target order replicas at once: %s", an.Why)
	an, kept := cycle(21*time.Minute, false)
	assert.Zero(t, an.SlowFloor)
	assert.Equal(t, ordered, kept, "the next calm cycle keeps them")
	var released int32
	for m := 22; m < 60; m++ {
		_, released = cycle(time.Duration(m)*time.Minute, false)
	}
	assert.Less(t, released, ordered, "given back after the short hold")
}

// Slow replicas the rates explain (arrivals within a replica of what the
// saturated fleet serves: a fleet short of its demand) are met by the
// floor's order, which is not held: the capacity was not fitted too high,
// and the plan covers the demand once the replicas ordered serve. Slow
// replicas at a rate far under their supply are held for a short hold.
func TestSlowFloorHeldOnlyWhenRatesDoNotExplainIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		held bool
	}{
		{"rates far under the floor: held", 3, true},
		{"rates within a replica of the floor: not held", 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			var an Analysis
			for m := range 21 {
				g := fleet(3, 0, tc.rate)
				g.Variants[1].MaxReplicas = 0
				g.Now = t0.Add(time.Duration(m) * time.Minute)
				if m == 20 {
					for i := range g.Replicas {
						g.Replicas[i].TPOT = slow
					}
				}
				an, _, st = run(t, g, st)
			}
			require.Positive(t, an.Saturated, "the slow replicas set the floor")
			assert.Equal(t, an.Reporting, an.Slow)
			if !tc.held {
				assert.Zero(t, an.SlowFloor)
				assert.Contains(t, an.Summary()[0], "not held)")
				return
			}
			assert.InDelta(t, an.Staffed, an.SlowFloor, 1e-9)
			assert.Contains(t, an.Summary()[0], "held for a short hold)")
		})
	}
}

// Replicas that just took a drained backlog run full and slow for a rate
// window: that is the backlog's load, not saturation demand. With a
// start-up longer than two rate windows their floor neither orders nor is
// held then; the same replicas slow with no backlog drained (or two rate
// windows after it, or with a start-up within the two windows) still are
// saturation evidence.
func TestDrainedBacklogIsNotSaturation(t *testing.T) {
	startup := 4 * time.Minute
	cycle := func(st any, at time.Duration, backlog float64, over bool) (Analysis, decision.Signal, any) {
		g := fleet(4, 0, 4)
		g.Variants[0].StartupDelay = startup
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		g.SchedulerQueueSize = backlog
		for i := range g.Replicas {
			if over {
				g.Replicas[i].TPOT = slow
				g.Replicas[i].KvCacheUsage = 0.95
			}
		}
		return run(t, g, st)
	}
	learned := func() any {
		var st any
		for m := range 10 {
			_, _, st = cycle(st, time.Duration(m)*time.Minute, 0, false)
		}
		return st
	}

	// The control: slow replicas with no backlog drained order at once.
	slowAn, _, _ := cycle(learned(), 10*time.Minute, 0, true)
	require.True(t, slowAn.Saturated > 0 && slowAn.SlowFloor > 0, "the fixture's replicas are saturation evidence: %+v", slowAn)

	st := learned()
	_, _, st = cycle(st, 10*time.Minute, 2000, false)
	for _, at := range []time.Duration{10*time.Minute + 30*time.Second, 11 * time.Minute, 12*time.Minute + 30*time.Second} {
		an, sig, next := cycle(st, at, 0, true)
		st = next
		assert.Zero(t, an.SlowFloor, "at %s, after the drain: %s", at, sig.Reason)
		assert.NotEqual(t, WhySat, an.Why, "at %s, after the drain: %s", at, sig.Reason)
	}
	an, sig, _ := cycle(st, 13*time.Minute, 0, true)
	assert.Positive(t, an.SlowFloor, "two rate windows after the drain, slow replicas are evidence again: %s", sig.Reason)

	// A 1m start-up: the floor's replicas would serve within the windows.
	startup = time.Minute
	st = learned()
	_, _, st = cycle(st, 10*time.Minute, 2000, false)
	an, sig, _ = cycle(st, 10*time.Minute+30*time.Second, 0, true)
	assert.Positive(t, an.SlowFloor, "with a 1m start-up: %s", sig.Reason)
}
