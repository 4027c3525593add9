package planner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// tpot is a TPOT histogram of rate requests per second, share of them over
// 100 ms.
func tpot(rate, share float64) decision.Histogram {
	return decision.Histogram{Bounds: []float64{0.05, 0.1, math.Inf(1)},
		Counts: []float64{rate * (1 - share), rate * (1 - share), rate}}
}

func TestBudget(t *testing.T) {
	const att = 0.99
	reps := func(rate, share, ttftShare float64) []decision.ReplicaMetrics {
		var ttft decision.Histogram
		if ttftShare > 0 {
			// vLLM's buckets: a 2 s target counts from 2.5 s on.
			ttft = decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)},
				Counts: []float64{rate / 2 * (1 - ttftShare), rate / 2 * (1 - ttftShare), rate / 2}}
		}
		return []decision.ReplicaMetrics{{Pod: "a", TPOT: tpot(rate/2, share), TTFT: ttft}, {Pod: "b", TPOT: tpot(rate/2, share), TTFT: ttft}}
	}
	cases := []struct {
		name      string
		prev      Budget
		since     time.Duration // since prev.At
		rate      float64       // requests per second finished
		share     float64       // of them over the ITL target
		ttft      float64       // of them over the TTFT target
		waiting   bool          // requests wait: TTFT misses count
		wantReqs  float64
		wantOver  float64
		wantSpent bool
	}{
		{name: "first cycle counts one rate window", rate: 10, share: 0.005, wantReqs: 600, wantOver: 3},
		{name: "misses over the budget", rate: 10, share: 0.05, wantReqs: 600, wantOver: 30, wantSpent: true},
		{name: "too few requests to judge", rate: 1, share: 0.5, wantReqs: 60, wantOver: 30},
		{name: "the past decays over budgetMemory", prev: Budget{Requests: 1000, Over: 50}, since: 30 * time.Second, rate: 10, share: 0,
			wantReqs: 1000*math.Exp(-0.5/60) + 300, wantOver: 50 * math.Exp(-0.5/60), wantSpent: true},
		{name: "clean requests repay the budget", prev: Budget{Requests: 1000, Over: 50}, since: time.Hour, rate: 100, share: 0,
			wantReqs: 1000*math.Exp(-1.0/60) + 6000, wantOver: 50 * math.Exp(-1.0/60)},
		{name: "a gap counts one rate window, not the gap", prev: Budget{Requests: 0}, since: 10 * time.Minute, rate: 10, share: 0, wantReqs: 600},
		{name: "TTFT misses while requests wait count with the ITL's", rate: 10, share: 0.005, ttft: 0.01, waiting: true, wantReqs: 600, wantOver: 9, wantSpent: true},
		{name: "TTFT misses with nothing waiting are the prompts'", rate: 10, share: 0.005, ttft: 0.01, wantReqs: 600, wantOver: 3},
		{name: "misses never exceed the requests", rate: 10, share: 0.6, ttft: 0.6, waiting: true, wantReqs: 600, wantOver: 600, wantSpent: true},
	}
	now := t0.Add(time.Hour)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := tc.prev
			if tc.since > 0 {
				prev.At = now.Add(-tc.since)
			}
			backlog := 0.0
			if tc.waiting {
				backlog = 3
			}
			b := prev.record(now, mergeWindow(reps(tc.rate, tc.share, tc.ttft)), 100, queuedTTFT(backlog, 2000))
			assert.InDelta(t, tc.wantReqs, b.Requests, 1e-6)
			assert.InDelta(t, tc.wantOver, b.Over, 1e-6)
			assert.Equal(t, now, b.At)
			assert.Equal(t, tc.wantSpent, b.spent(att))
		})
	}
}

// A first burst whose onset spent the error budget is held for the full
// hold, where one that did not is given back after a short hold.
func TestSpentBudgetHoldsTheFirstBurst(t *testing.T) {
	const startup = 3 * time.Minute
	for _, tc := range []struct {
		name string
		// share of the burst's requests over the ITL target
		share float64
		spent bool
	}{
		{"budget kept: a short hold", 0, false},
		{"budget spent: the full hold", 0.2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &minuteFleet{t: t, startup: startup, reportTPOT: true, l4: 1, st: seasoned()}
			for range 10 {
				f.cycle(1, 0)
			}
			calm := f.l4
			for range 5 {
				f.cycle(12, tc.share)
			}
			lastBurst := f.at - time.Minute
			burst := f.cycle(1, 0).PlannedReplicas["l4"]
			require.Greater(t, burst, calm, "the burst orders replicas")
			for f.at-lastBurst <= shortHoldFactor*startup+time.Minute {
				f.cycle(1, 0)
			}
			if !tc.spent {
				assert.Less(t, f.l4, burst, "past a short hold the burst's replicas are released")
				return
			}
			// The misses' own saturation floor is held for a short hold;
			// what the burst's arrivals planned is kept for the full hold.
			kept := f.l4
			require.Greater(t, kept, calm, "past a short hold the burst's plan is kept")
			for f.at-lastBurst < holdFactor*startup {
				sig := f.cycle(1, 0)
				require.Equal(t, kept, sig.PlannedReplicas["l4"], "%s after the burst, within the hold: %s", f.at-time.Minute-lastBurst, sig.Reason)
			}
			for f.at-lastBurst <= holdFactor*startup+2*time.Minute {
				f.cycle(1, 0)
			}
			assert.Less(t, f.l4, kept, "past the hold the burst's replicas are released")
		})
	}
}

// A backlog growing at an onset is ordered for what it will be when the
// replicas ordered serve: its growth is added to the rate that drains it.
func TestGrowingBacklogOrderedOnce(t *testing.T) {
	g := fleet(2, 0, 2)
	g.SchedulerQueueSize = 60
	_, _, st := run(t, g, nil)
	g.Now = t0.Add(30 * time.Second)
	g.SchedulerQueueSize = 360
	a, _, st := run(t, g, st)
	assert.InDelta(t, 10, a.BacklogGrowth, 1e-9, "300 more requests in 30 s")
	assert.InDelta(t, 360/120.0+10, a.BacklogRate, 1e-9)
	// A backlog draining is not growth.
	g.Now = t0.Add(time.Minute)
	g.SchedulerQueueSize = 200
	b, _, _ := run(t, g, st)
	assert.Zero(t, b.BacklogGrowth)
	assert.InDelta(t, 200/120.0, b.BacklogRate, 1e-9)
}

func TestBudgetCovers(t *testing.T) {
	const att = 0.99
	cases := []struct {
		name  string
		b     Budget
		ahead float64 // requests until an order would serve
		share float64 // of them over target
		want  bool
	}{
		{"room for the misses ahead", Budget{Requests: 10000, Over: 20}, 2000, 0.02, true},
		{"the misses ahead spend it", Budget{Requests: 10000, Over: 80}, 2000, 0.05, false},
		{"already spent", Budget{Requests: 10000, Over: 150}, 2000, 0, false},
		{"too few requests to judge", Budget{Requests: 50}, 2000, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.b.covers(att, tc.ahead, tc.share))
		})
	}
}

func TestWindowMisses(t *testing.T) {
	ttft := decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{4, 4.5, 5}}
	reps := []decision.ReplicaMetrics{{TPOT: tpot(3, 0.02), TTFT: ttft}, {TPOT: tpot(2, 0.02)}}
	n, share := mergeWindow(reps).misses(100, 2000)
	assert.InDelta(t, 300, n, 1e-9, "five requests a second over the rate window")
	assert.InDelta(t, 0.02+0.1, share, 1e-9, "over the ITL target, and over 2.5 s (the bucket at or above 2 s)")
	n, share = mergeWindow(reps).misses(0, 2000)
	assert.InDelta(t, 300, n, 1e-9)
	assert.InDelta(t, 0.1, share, 1e-9, "no ITL target: only the TTFT's misses")
	_, share = mergeWindow([]decision.ReplicaMetrics{{TPOT: tpot(5, 0.95), TTFT: ttft}}).misses(100, 2000)
	assert.Equal(t, 1.0, share, "never more than all of them")
}
