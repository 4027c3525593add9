package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Replicas already ordered (pending) are supply: a cycle that sees them
// pending does not order them again.
func TestPendingNotReordered(t *testing.T) {
	g := fleet(2, 0, 12)
	an, sig, st := run(t, g, nil)
	require.Greater(t, total(sig), int32(2), "demand 12 req/s needs more than two replicas: %s", sig.Reason)
	// Next cycle: the ordered replicas exist but are not ready.
	g2 := fleet(2, 0, 12)
	g2.Now = t0.Add(30 * time.Second)
	for i := range g2.Variants {
		v := &g2.Variants[i]
		v.CurrentReplicas = sig.PlannedReplicas[v.Name]
		v.PendingReplicas = v.CurrentReplicas - map[string]int32{"l4": 2}[v.Name]
	}
	_, sig2, _ := run(t, g2, st)
	assert.Equal(t, sig.PlannedReplicas, sig2.PlannedReplicas, "first plan %+v", an)
}

// A shortfall orders at once when it exceeds smallShortfall of the
// supply or comes on a steady rise, else only once it has lasted
// persistFor.
func TestLasting(t *testing.T) {
	cases := []struct {
		name       string
		since      time.Duration // before now; 0: no shortfall seen
		need       float64
		rising     bool
		want       shortfall
		wantMarked bool
	}{
		{"large shortfall orders at once", 0, 12, false, shortfallLarge, false},
		{"small shortfall first seen waits", 0, 10.5, false, shortfallYoung, true},
		{"small shortfall for 30s waits", 30 * time.Second, 10.5, false, shortfallYoung, true},
		{"small shortfall for a window lasted", time.Minute, 10.5, false, shortfallLasted, false},
		{"large shortfall after a window is still large", time.Minute, 12, false, shortfallLarge, false},
		{"small shortfall on a steady rise orders at once", 0, 10.5, true, shortfallLarge, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st, next State
			if tc.since > 0 {
				st.ShortSince = t0.Add(-tc.since)
			}
			assert.Equal(t, tc.want, lasting(t0, st, &next, 10, tc.need, tc.rising))
			assert.Equal(t, tc.wantMarked, !next.ShortSince.IsZero())
		})
	}
}

// Through the analyzer: a plan short by a few percent keeps the fleet for
// one metrics window, then orders.
func TestSmallShortfallWaitsOneWindow(t *testing.T) {
	cycle, rate := fewPercentShort(t, learnedFleet(t, 4, 24))
	wait := cycle(30*time.Second, rate)
	assert.Equal(t, int32(4), total(wait), wait.Reason)
	assert.Contains(t, wait.Reason, "waiting one metrics window")
	order := cycle(90*time.Second, rate)
	assert.Greater(t, total(order), int32(4), order.Reason)
}

// A small shortfall that comes back the cycle after one at the plan has
// lasted: the cycle between is noise, not its end.
func TestSmallShortfallThatComesBackOrders(t *testing.T) {
	cycle, rate := fewPercentShort(t, learnedFleet(t, 4, 24))
	wait := cycle(30*time.Second, rate)
	require.Contains(t, wait.Reason, "waiting one metrics window")
	between := cycle(60*time.Second, rate*0.8)
	require.Equal(t, int32(4), total(between), between.Reason)
	order := cycle(90*time.Second, rate)
	assert.Greater(t, total(order), int32(4), order.Reason)
}

// fewPercentShort finds the rate that leaves four L4s, their line learned
// (the state learned), a few percent short of the plan (under
// smallShortfall), and returns a cycle of that fleet at a time after the
// search and a rate, changed by with, and the rate.
func fewPercentShort(t *testing.T, learned any) (func(at time.Duration, rate float64, with ...func(*decision.Group)) decision.Signal, float64) {
	t.Helper()
	var rate float64
	var st any
	for r := 1.0; r < 40; r += 0.05 {
		g := fleet(4, 0, r)
		g.Now = t0.Add(10 * time.Minute)
		an, _, s := run(t, g, learned)
		if an.Staffed > an.Supply*1.01 && an.Staffed < an.Supply*(1+smallShortfall) {
			rate, st = r, s
			break
		}
	}
	require.NotZero(t, rate, "some rate leaves four L4s a few percent short")
	return func(at time.Duration, rate float64, with ...func(*decision.Group)) decision.Signal {
		g := fleet(4, 0, rate)
		g.Now = t0.Add(10*time.Minute + at)
		for _, f := range with {
			f(&g)
		}
		var sig decision.Signal
		_, sig, st = run(t, g, st)
		return sig
	}, rate
}

// On a steady rise a small shortfall orders at once: it only grows.
func TestSmallShortfallOnASteadyRiseOrdersAtOnce(t *testing.T) {
	var st any
	for i := range 240 {
		// Twenty minutes at 8 req/s, then 0.05 req/s more every cycle.
		g := fleet(4, 0, 8+0.05*float64(max(i-40, 0)))
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		an, sig, next := run(t, g, st)
		st = next
		if an.Staffed <= an.Supply || i < 40 {
			continue
		}
		require.Less(t, an.Staffed, an.Supply*(1+smallShortfall), "the first shortfall of a slow rise is small")
		require.Positive(t, an.Rising, "the rise is forecast")
		assert.Greater(t, total(sig), int32(4), sig.Reason)
		assert.NotContains(t, sig.Reason, "waiting one metrics window")
		return
	}
	t.Fatal("the rise never outgrew four L4s")
}

// A small shortfall that lasted does not order while the requests show it
// costs less than the error budget has until a replica ordered now would
// serve; it orders once they miss more.
func TestSmallShortfallWithinTheBudgetWaits(t *testing.T) {
	// Twenty minutes at a steady load, ten minutes before the cycles under
	// test: no rises to plan a margin for, and no trend.
	var steady any
	for i := range 40 {
		g := fleet(4, 0, 13.5)
		g.Now = t0.Add(time.Duration(i-40) * 30 * time.Second)
		_, _, steady = run(t, g, steady)
	}
	missing := func(share float64) func(*decision.Group) {
		return func(g *decision.Group) {
			for i := range g.Replicas {
				g.Replicas[i].TPOT = tpot(g.Replicas[i].ArrivalRate, share)
			}
		}
	}
	cycle, rate := fewPercentShort(t, steady)
	wait := cycle(30*time.Second, rate, missing(0.002))
	require.Equal(t, int32(4), total(wait), wait.Reason)
	require.Contains(t, wait.Reason, "waiting one metrics window")
	within := cycle(90*time.Second, rate, missing(0.002))
	assert.Equal(t, int32(4), total(within), within.Reason)
	assert.Contains(t, within.Reason, "which the error budget covers")
	still := cycle(2*time.Minute, rate, missing(0.002))
	assert.Equal(t, int32(4), total(still), "the shortfall is still covered: %s", still.Reason)
	// 5% of the requests over the ITL target for a start-up more spend it.
	order := cycle(150*time.Second, rate, missing(0.05))
	assert.Greater(t, total(order), int32(4), order.Reason)
}

// Which small shortfalls wait on the budget: only for the demand now, and
// while the last window's misses for a start-up leave the budget unspent.
// (A saturated group's shortfall is never asked: mix orders for it.)
func TestBudgetCoversShortfall(t *testing.T) {
	slo := params.SLO{TargetITLms: 100, TargetTTFTms: 2000, Attainment: 0.99}
	// Two replicas finishing 5 req/s each: 600 requests a rate window.
	reps := func(share float64) []decision.ReplicaMetrics {
		return []decision.ReplicaMetrics{{TPOT: tpot(5, share)}, {TPOT: tpot(5, share)}}
	}
	roomy := Budget{Requests: 20000, Over: 40}
	cases := []struct {
		name   string
		an     Analysis
		share  float64 // of the window's requests over the ITL target
		budget Budget
		want   bool
	}{
		{"covered", Analysis{Staffed: 10.5, Supply: 10}, 0.01, roomy, true},
		{"a trend forecast", Analysis{Staffed: 10.5, Supply: 10, Rising: 0.5}, 0.01, roomy, false},
		{"a rise margin", Analysis{Staffed: 10.5, Supply: 10, RiseMargin: 0.5}, 0.01, roomy, false},
		{"the daily profile's rise", Analysis{Staffed: 10.5, Supply: 10, ProfileRise: 0.5}, 0.01, roomy, false},
		// 40 + 0.2 x 2,400 > 1% of 22,400.
		{"the window's misses spend it within a start-up", Analysis{Staffed: 10.5, Supply: 10}, 0.2, roomy, false},
		{"already spent", Analysis{Staffed: 10.5, Supply: 10}, 0, Budget{Requests: 20000, Over: 300}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &cycle{window: mergeWindow(reps(tc.share)), slo: slo, an: tc.an,
				horizon: 4 * time.Minute, next: &State{Budget: tc.budget}}
			assert.Equal(t, tc.want, c.budgetCoversShortfall())
		})
	}
}

// A shortfall orders what covers the present plan, not a held peak the
// fleet was not short of when it was planned (a peak in req/s of another
// request shape, or of a fleet since shrunk).
func TestShortfallCoversThePresentPlan(t *testing.T) {
	g := fleet(2, 0, 24)
	g.Now = t0.Add(10 * time.Minute)
	_, burst, st := run(t, g, learnedFleet(t, 2, 12))
	perL4 := burst.CapacityPerReplica["l4"]
	require.Positive(t, perL4)
	g = fleet(3, 0, 3*perL4*1.2)
	g.Now = t0.Add(11 * time.Minute)
	an, sig, _ := run(t, g, st)
	require.Greater(t, an.Held, an.Staffed, "the burst's plan is held")
	require.Greater(t, an.Staffed, an.Supply*1.1, "short by more than 10%%: orders at once")
	var supply float64
	for v, n := range sig.PlannedReplicas {
		supply += float64(n) * sig.CapacityPerReplica[v]
	}
	assert.GreaterOrEqual(t, supply, an.Staffed, "the present plan is covered: %s", sig.Reason)
	assert.Less(t, supply, an.Held, "no replicas for the held peak: %s", sig.Reason)
}

// Replicas ordered for a queue that saturated every replica at one scrape
// are given back while still starting once the queue is gone; those of a
// queue that stays, of a backlog still waiting, or of an order for demand
// are kept until they serve.
func TestCancelsStartingReplicasOfAQueueGone(t *testing.T) {
	const rate = 6
	queued := func(at time.Duration, st any) (Analysis, decision.Signal, any) {
		g := fleet(2, 0, rate)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		for i := range g.Replicas {
			g.Replicas[i].QueueLength = 6
		}
		return run(t, g, st)
	}
	// next is the cycle 30 s after an order of l4 replicas: those beyond
	// the two serving still start.
	next := func(st any, l4 int32, rate float64, queue, backlog float64) (Analysis, decision.Signal) {
		g := fleet(2, 0, rate)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(10*time.Minute + 30*time.Second)
		g.Variants[0].CurrentReplicas, g.Variants[0].PendingReplicas = l4, l4-2
		g.SchedulerQueueSize = backlog
		for i := range g.Replicas {
			g.Replicas[i].QueueLength = queue
		}
		an, sig, _ := run(t, g, st)
		return an, sig
	}
	an, sig, st := queued(10*time.Minute, learnedFleet(t, 2, rate))
	require.Equal(t, WhySat, an.Why, sig.Reason)
	ordered := sig.PlannedReplicas["l4"]
	require.Greater(t, ordered, int32(2), sig.Reason)

	an, sig = next(st, ordered, rate, 0, 0)
	assert.Equal(t, WhyCancel, an.Why, sig.Reason)
	assert.Less(t, sig.PlannedReplicas["l4"], ordered, sig.Reason)
	assert.GreaterOrEqual(t, sig.PlannedReplicas["l4"], int32(2), "only starting replicas go: %s", sig.Reason)
	assert.GreaterOrEqual(t, an.PlanSupply+1e-9, an.Held, "down to the held plan: %s", sig.Reason)

	for _, tc := range []struct {
		name           string
		queue, backlog float64
	}{
		{"the queue stays", 6, 0},
		{"a backlog still waits at the gateway", 0, 3},
	} {
		an, sig := next(st, ordered, rate, tc.queue, tc.backlog)
		assert.NotEqual(t, WhyCancel, an.Why, "%s: %s", tc.name, sig.Reason)
		assert.GreaterOrEqual(t, sig.PlannedReplicas["l4"], ordered, "%s: %s", tc.name, sig.Reason)
	}

	// An order for demand: the hold keeps it like the demand.
	g := fleet(2, 0, 3*rate)
	g.Variants[1].MaxReplicas = 0
	g.Now = t0.Add(10 * time.Minute)
	an, sig, st = run(t, g, learnedFleet(t, 2, rate))
	require.NotEqual(t, WhySat, an.Why, sig.Reason)
	ordered = sig.PlannedReplicas["l4"]
	require.Greater(t, ordered, int32(2), sig.Reason)
	an, sig = next(st, ordered, rate, 0, 0)
	assert.NotEqual(t, WhyCancel, an.Why, sig.Reason)
	assert.Equal(t, ordered, sig.PlannedReplicas["l4"], sig.Reason)
}

// A release gives back the variant whose requests miss the ITL target
// well beyond the error budget before the one whose requests meet it,
// whatever the lines say: on Azure code x3 the fitted L40S line matched
// the H100's, and the cheapest release dropped all twelve H100s while the
// L40S missed on 5.3% of its requests (12 L40S then saturated at a fifth
// of the rate their lines claimed).
func TestReleaseKeepsTheVariantMeetingITL(t *testing.T) {
	const rate = 4
	group := func(i int, l4Over float64) decision.Group {
		g := fleet(2, 4, rate)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		for j := range g.Replicas {
			// Too few requests each for a replica to count as over
			// its SLO (minOverSLORequests), enough together.
			g.Replicas[j].ArrivalRate = 0.1
			g.Replicas[j].TPOT = tpot(0.1, l4Over)
		}
		// The H100s were first seen serving 3 req/s each within the
		// target: a release may credit them with their line's rate.
		load := rate / 6.0
		if i < 4 {
			load = 3
		}
		for _, p := range []string{"h100-a", "h100-b", "h100-c", "h100-d"} {
			g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: p, Variant: "h100",
				NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
				ArrivalRate: load, AvgITLms: 20, AvgTTFTms: 200, TPOT: tpot(load, 0)})
		}
		return g
	}
	released := func(l4Over float64) (Analysis, decision.Signal, any) {
		var st any = seasoned()
		var an Analysis
		var sig decision.Signal
		// Past the found fleet's hold at a steady low rate: a release.
		for i := range 60 {
			an, sig, st = run(t, group(i, l4Over), st)
		}
		return an, sig, st
	}
	an, meeting, _ := released(0)
	require.Less(t, meeting.PlannedReplicas["h100"], int32(4), "with both variants meeting the target, H100s are given back: %s", meeting.Reason)
	assert.Empty(t, an.MissingITL)

	an, missing, st := released(0.1)
	assert.Equal(t, int32(4), missing.PlannedReplicas["h100"], "the H100s meet the target and stay: %s", missing.Reason)
	assert.Less(t, missing.PlannedReplicas["l4"], int32(2), "the L4s missing it go: %s", missing.Reason)
	assert.Equal(t, []string{"l4 (10.0% of its requests over the ITL target)"}, an.MissingITL, "the explain output says why")

	// A lull with too few requests to tell: the shares told within a
	// start-up delay (3 minutes) still hold, and no longer after it.
	quiet := func(i int) decision.Group {
		g := group(i, 0)
		for j := range g.Replicas {
			g.Replicas[j].TPOT = decision.Histogram{}
		}
		return g
	}
	var sig decision.Signal
	for i := 60; i < 62; i++ {
		_, sig, st = run(t, quiet(i), st)
		assert.Equal(t, int32(4), sig.PlannedReplicas["h100"], "cycle %d: %s", i, sig.Reason)
	}
	for i := 62; i < 68; i++ {
		_, sig, st = run(t, quiet(i), st)
	}
	assert.Less(t, sig.PlannedReplicas["h100"], int32(4), "a start-up delay after the last share told: %s", sig.Reason)
}
