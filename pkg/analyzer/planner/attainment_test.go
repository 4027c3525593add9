package planner

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func TestAdaptHeadroom(t *testing.T) {
	const target = 0.99 // ITL budget: half of 1%
	budget := itlBudgetShare * (1 - target)
	verdict := verdictMisses / budget // requests a verdict needs
	cases := []struct {
		name     string
		h        float64
		pool     Pool
		a        attainment
		wantH    float64
		wantPool Pool
		judged   bool
	}{
		{"never adapted starts at the default", 0, Pool{}, attainment{}, startHeadroom, Pool{}, false},
		{"no requests: nothing learned", 0.8, Pool{Requests: 5}, attainment{Load: 3}, 0.8, Pool{Requests: 5}, false},
		{"light load says little, but its requests are seen", 0.8, Pool{}, attainment{Over: 0, Requests: 100, Load: 1}, 0.8, Pool{Seen: 100}, false},
		{"overload while short is the plan's to order for", 0.8, Pool{}, attainment{Over: 0.5, Requests: 100, Load: 4}, 0.8, Pool{Seen: 100}, false},
		{"too few requests for a verdict: pooled", 0.8, Pool{Requests: 10, Over: 1, Seen: 10}, attainment{Over: 0.05, Requests: 100, Load: 3},
			0.8, Pool{Requests: 110, Over: 6, Seen: 110}, false},
		{"ten misses within noise of the expected: pooled", 0.8, Pool{}, attainment{Over: 12.0 / 1500, Requests: 1500, Load: 3},
			0.8, Pool{Requests: 1500, Over: 12, Seen: 1500}, false},
		{"clearly over before a full pool: lower", 0.8, Pool{Requests: 10, Over: 1}, attainment{Over: 0.1, Requests: 100, Load: 3},
			0.8 * headroomDown, Pool{}, true},
		{"over budget: lower", 0.8, Pool{}, attainment{Over: 2 * budget, Requests: verdict, Load: 3}, 0.8 * headroomDown, Pool{}, true},
		{"well within: raise", 0.8, Pool{}, attainment{Over: budget / 4, Requests: verdict, Load: 3}, 0.8 + headroomUp, Pool{}, true},
		{"within but near the budget: keep, start over", 0.8, Pool{}, attainment{Over: 0.75 * budget, Requests: verdict, Load: 3}, 0.8, Pool{}, true},
		// 1.5 budgets over in the pool, as many requests again seen
		// unpooled: the share of all of them is within the budget.
		{"within the budget of every request seen: keep", 0.8, Pool{Seen: verdict}, attainment{Over: 1.5 * budget, Requests: verdict, Load: 3}, 0.8, Pool{}, true},
		{"well within it: raise", 0.8, Pool{Seen: 3 * verdict}, attainment{Over: 1.5 * budget, Requests: verdict, Load: 3}, 0.8 + headroomUp, Pool{}, true},
		{"never below the floor", minHeadroom, Pool{}, attainment{Over: 1, Requests: verdict, Load: 3}, minHeadroom, Pool{}, true},
		{"never above the ceiling", maxHeadroom, Pool{}, attainment{Requests: verdict, Load: 3}, maxHeadroom, Pool{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The plan's rate per replica is 3.2 req/s: loads 2-3.5 are near it.
			h, pool, judged := adaptHeadroom(t0, tc.h, tc.pool, tc.a, 3.2, target, true)
			assert.Equal(t, tc.judged, judged, "judged")
			assert.InDelta(t, tc.wantH, h, 1e-12)
			assert.InDelta(t, tc.wantPool.Requests, pool.Requests, 1e-9)
			assert.InDelta(t, tc.wantPool.Over, pool.Over, 1e-9)
			assert.InDelta(t, tc.wantPool.Seen, pool.Seen, 1e-9)
		})
	}
	// With supply covering demand, a variant loaded well over its rate is
	// loaded so by the gateway's split: the group's misses are pooled.
	over := attainment{Over: 2 * budget, GroupOver: 2 * budget, Requests: verdict, Load: 4}
	h, pool, _ := adaptHeadroom(t0, 0.8, Pool{}, over, 3.2, target, false)
	assert.InDelta(t, 0.8*headroomDown, h, 1e-12, "split overload lowers the headroom")
	assert.Zero(t, pool.Requests)
	h, _, _ = adaptHeadroom(t0, 0.8, Pool{}, over, 3.2, target, true)
	assert.InDelta(t, 0.8, h, 1e-12, "an onset's overload does not")
	affordable := over
	affordable.GroupOver = budget / 4
	h, _, _ = adaptHeadroom(t0, 0.8, Pool{}, affordable, 3.2, target, false)
	assert.InDelta(t, 0.8+headroomUp, h, 1e-12, "nor its own misses while the group's are well within the budget")
}

// Requests over the ITL target at the plan's load lower the variant's
// headroom, and the plan orders more replicas than for the same traffic
// meeting the target; requests well within it let the headroom rise.
func TestMissedITLBuysCapacity(t *testing.T) {
	// The L4's rate per replica at the SLO, as first planned.
	first, _, _ := run(t, fleet(4, 0, 4), nil)
	capacity := first.Variants[1].Capacity.Rate
	require.Greater(t, capacity, 0.0)
	plan := func(over float64) (VariantAnalysis, decision.Signal) {
		var st any
		var an Analysis
		var sig decision.Signal
		for i := range 60 {
			// Four L4s each carrying 90% of the first plan's rate.
			g := missingL4s(0.9*capacity, over)
			g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
			an, sig, st = run(t, g, st)
		}
		return an.Variants[1], sig
	}
	missing, missingSig := plan(0.05)
	meeting, meetingSig := plan(0)
	assert.InDelta(t, 0.05, missing.TPOTOverTarget, 1e-9)
	assert.Less(t, missing.Headroom, startHeadroom, "%+v", missing)
	assert.Greater(t, meeting.Headroom, startHeadroom, "%+v", meeting)
	assert.Less(t, missing.Capacity.Rate, meeting.Capacity.Rate)
	cost := func(sig decision.Signal) int32 { return 5*sig.PlannedReplicas["l4"] + 15*sig.PlannedReplicas["h100"] }
	assert.Greater(t, cost(missingSig), cost(meetingSig), "missing: %s; meeting: %s", missingSig.Reason, meetingSig.Reason)
}

// missingL4s is four L4s carrying load each (req/s), over share of their
// requests over the ITL target.
func missingL4s(load, over float64) decision.Group {
	g := fleet(4, 0, 4*load)
	for j := range g.Replicas {
		g.Replicas[j].TPOT = decision.Histogram{Bounds: []float64{0.05, 0.1, math.Inf(1)}, Counts: []float64{0.5 * load, (1 - over) * load, load}}
	}
	return g
}

// A verdict on the headroom counts the requests of the rate window; the
// next one waits for a window of requests it has not counted, or one
// minute of misses would lower the headroom at every 30 s cycle.
func TestHeadroomJudgedOncePerWindow(t *testing.T) {
	first, _, _ := run(t, fleet(4, 0, 4), nil)
	load := 0.7 * first.Variants[1].Capacity.Rate
	var st any
	var an Analysis
	for i := range 5 {
		g := missingL4s(load, 0.5)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		an, _, st = run(t, g, st)
		// Every cycle reports the share it reads, judged or not.
		assert.InDelta(t, 0.5, an.Variants[1].TPOTOverTarget, 1e-9, "cycle %d", i)
	}
	// Verdicts at 0, 60 s and 120 s.
	assert.InDelta(t, startHeadroom*math.Pow(headroomDown, 3), an.Variants[1].Headroom, 1e-9)
}

// Misses while replicas of any variant start are the onset's: the ready
// replicas carry the load the starting ones will take, and the plan has
// already ordered for it. They do not lower a variant's headroom; the same
// misses with nothing starting do (the gateway's split loaded it so), and
// so do they beside a pod stuck Pending past its start-up (3 min here),
// which would otherwise keep the feedback off for as long as it is stuck.
func TestStartingReplicasKeepTheHeadroom(t *testing.T) {
	const load = 8 // req/s per L4: the fixture's ITL target, past any plan's rate
	cases := []struct {
		name       string
		starting   int32
		orderedAgo time.Duration
		want       float64
	}{
		{"an H100 starting", 1, time.Minute, startHeadroom},
		{"nothing starting", 0, time.Minute, startHeadroom * headroomDown},
		{"an H100 stuck Pending", 1, 10 * time.Minute, startHeadroom * headroomDown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := missingL4s(load, 0.5)
			g.Variants[1].CurrentReplicas = tc.starting
			g.Variants[1].PendingReplicas = tc.starting
			g.Variants[1].LastUpdate = g.Now.Add(-tc.orderedAgo)
			an, _, _ := run(t, g, nil)
			assert.InDelta(t, tc.want, an.Variants[1].Headroom, 1e-9, "load %.2f, rate %.2f", load, an.Variants[1].Capacity.Rate)
		})
	}
}

// Replicas that report no TPOT histogram (older engines) keep the
// starting headroom.
func TestNoTPOTKeepsHeadroom(t *testing.T) {
	var st any
	var an Analysis
	for i := range 20 {
		g := fleet(4, 0, 10)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		an, _, st = run(t, g, st)
	}
	assert.Equal(t, startHeadroom, an.Variants[1].Headroom)
	assert.Zero(t, an.Variants[1].TPOTOverTarget)
}

// The request shape the plan sizes by follows the replicas' 5m token
// averages over shapeMemory: one window in which a few 30k-token answers
// finished moves it by a cycle's share, not all the way.
func TestRequestShapeFollowsSlowly(t *testing.T) {
	report := func(out float64) decision.Group {
		g := fleet(2, 0, 2)
		for i := range g.Replicas {
			g.Replicas[i].AvgInputTokens, g.Replicas[i].AvgOutputTokens = 1000, out
		}
		return g
	}
	first, _, st := run(t, report(2000), nil)
	assert.Equal(t, 2000.0, first.Output, "a first cycle reads the replicas")
	cases := []struct {
		name  string
		after time.Duration
		want  float64
	}{
		{"one 30 s cycle later", 30 * time.Second, 2000 + 18000*0.1},
		{"a whole memory later", shapeMemory, 20000},
		{"a replay at the same time", 0, 20000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := report(20000)
			g.Now = t0.Add(tc.after)
			an, _, _ := run(t, g, st)
			assert.InDelta(t, tc.want, an.Output, 1e-9)
			assert.InDelta(t, 1000, an.Input, 1e-9)
		})
	}
}

// Requests that waited in a replica's queue past the TTFT target less
// their own prefill miss the SLO whatever their decode: they count over
// the target beside the TPOT histogram's.
func TestQueueTimeCountsOverTarget(t *testing.T) {
	queue := func(rate, share float64) decision.Histogram {
		// share of the requests waited over 2.5 s, the rest under 1 s.
		return decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{rate * (1 - share), rate * (1 - share), rate}}
	}
	rep := func(variant string, q decision.Histogram) decision.ReplicaMetrics {
		return decision.ReplicaMetrics{Variant: variant, ArrivalRate: 2, TPOT: tpot(2, 0.01), QueueTime: q}
	}
	cases := []struct {
		name       string
		reps       []decision.ReplicaMetrics
		targetTTFT float64
		over       float64
		// groupOver counts every variant's replicas: the share of the
		// queued requests over target adds to the TPOT's.
		groupOver float64
	}{
		{"no queue histogram: TPOT alone", []decision.ReplicaMetrics{rep("l4", decision.Histogram{})}, 2000, 0.01, 0.01},
		{"queued past the target", []decision.ReplicaMetrics{rep("l4", queue(2, 0.1)), rep("l4", queue(2, 0.1))}, 2000, 0.11, 0.11},
		{"another variant's queue", []decision.ReplicaMetrics{rep("l4", decision.Histogram{}), rep("h100", queue(2, 0.5))}, 2000, 0.01, 0.51},
		{"no TTFT target", []decision.ReplicaMetrics{rep("l4", queue(2, 0.1))}, 0, 0.01, 0.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groupOver := mergeWindow(tc.reps).over(100, tc.targetTTFT)
			assert.InDelta(t, tc.groupOver, groupOver, 1e-9)
			a := observeAttainment("l4", tc.reps, groupOver, 100, tc.targetTTFT)
			assert.InDelta(t, tc.over, a.Over, 1e-9)
			assert.InDelta(t, tc.groupOver, a.GroupOver, 1e-9, "the group's share is passed through")
		})
	}
}

// l4sServing is n L4s serving rate (req/s) between them, over share of
// their requests over the ITL target; no H100 can be added.
func l4sServing(n int32, rate, over float64) decision.Group {
	g := fleet(n, 0, rate)
	g.Variants[1].MaxReplicas = 0
	load := rate / float64(n)
	for j := range g.Replicas {
		g.Replicas[j].TPOT = decision.Histogram{Bounds: []float64{0.05, 0.1, math.Inf(1)}, Counts: []float64{0.5 * load, (1 - over) * load, load}}
	}
	return g
}

// A variant's shown load is the highest load per replica its requests
// were seen meeting the ITL target at (in tokens per second): requests
// over the SLO's error budget show nothing.
func TestShownLoadNeedsRequestsWithinTarget(t *testing.T) {
	shown := func(over float64) float64 {
		var st any
		for i := range 4 {
			g := l4sServing(4, 8, over)
			g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
			_, _, st = run(t, g, st)
		}
		var s State
		require.NoError(t, json.Unmarshal(st.(json.RawMessage), &s))
		return s.Variants["l4"].ShownLoad
	}
	assert.InDelta(t, 2*(800+200), shown(0), 1e-6, "2 req/s of 800 + 200 tokens")
	assert.InDelta(t, 2*(800+200), shown(0.005), 1e-6, "within one error budget")
	assert.Zero(t, shown(0.05))
}

// A release trusts a variant's fitted line only as far as its requests
// were seen meeting the ITL target: twelve L4s found serving 1 req/s each,
// whose line claims several times that, give back at most down to twice
// the load per replica they showed; each later release goes further from
// the load seen at the size before.
func TestReleaseTrustsTheLineAsFarAsShown(t *testing.T) {
	const rate = 4.0
	n := int32(12)
	var st any
	var an Analysis
	var steps []int32
	for i := range 360 {
		g := l4sServing(n, rate, 0)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		var sig decision.Signal
		an, sig, st = run(t, g, st)
		if p := sig.PlannedReplicas["l4"]; p != n {
			steps = append(steps, p)
			n = p
		}
	}
	require.Greater(t, an.Variants[1].Capacity.Rate, 3*rate/12, "the line claims more than three times the load")
	require.NotEmpty(t, steps, "the fleet is released")
	assert.GreaterOrEqual(t, steps[0], int32(6), "the first release at most doubles the load per replica: %v", steps)
	assert.Less(t, n, steps[0], "later releases go further: %v", steps)
}

// The requests seen forget over the budget's memory: a night's light load
// is not a budget for the morning's bursts.
func TestPoolSeenForgets(t *testing.T) {
	p := Pool{Seen: 1000, SeenAt: t0}.see(t0.Add(budgetMemory), 100)
	assert.InDelta(t, 1000/math.E+100, p.Seen, 1e-9)
	assert.Equal(t, t0.Add(budgetMemory), p.SeenAt)
	assert.InDelta(t, 100, Pool{}.see(t0, 100).Seen, 1e-9, "nothing to forget at first")
	// After eight hours of light load, a verdict judges against the last
	// hour's requests, not the night's.
	night := Pool{}
	for i := range 960 { // 30 s cycles of 45 requests
		night = night.see(t0.Add(time.Duration(i)*30*time.Second), 45)
	}
	assert.Less(t, night.Seen, 45.0*2*60*1.01, "about an hour of requests (1/(1-e^-1/120) cycles)")
}

// A state persisted before the requests seen decayed and the trial keep
// went (a pool's seen without seenAt, a variant's trialFrom) decodes with
// what the variant learned; its seen starts decaying at its next update.
func TestStatePersistedBeforeSeenDecayDecodes(t *testing.T) {
	old := `{"analyzer":"slo-planner","variants":{"h100":{"fit":{},"lastReady":2,` +
		`"itlHeadroom":0.8,"tpotPool":{"requests":500,"over":2,"seen":3000},` +
		`"trialFrom":"2026-01-01T00:00:00Z"}}}`
	st, ok := analyzer.DecodeState[State](old)
	require.True(t, ok)
	vs := st.Variants["h100"]
	assert.InDelta(t, 0.8, vs.Headroom, 1e-12)
	assert.Equal(t, int32(2), vs.LastReady)
	assert.Equal(t, Pool{Requests: 500, Over: 2, Seen: 3000}, vs.TPOTPool)
	p := vs.TPOTPool.see(t0, 10)
	assert.InDelta(t, 3010, p.Seen, 1e-9, "no time to decay from")
	p = p.see(t0.Add(budgetMemory), 0)
	assert.InDelta(t, 3010/math.E, p.Seen, 1e-9, "then it decays")
}

// A variant the gateway loads past its rate while the group's supply
// covers its demand is judged by the group's misses: beside H100s that
// carry most of the requests within target, an L4 missing 3% of its own
// keeps its headroom; on its own, the same misses keep lowering it. (The
// first cycle, before any line is learned, judges the L4 by its own
// misses in both: its prior's rate is not past its load.)
func TestSplitOverloadJudgedByTheGroup(t *testing.T) {
	slo := params.SLO{TargetITLms: 100, Attainment: 0.99}
	l4 := decision.Variant{Name: "l4", CurrentReplicas: 2}
	const load = 8.0 // req/s per L4
	histogram := func(load, over float64) decision.Histogram {
		return decision.Histogram{Bounds: []float64{0.05, 0.1, math.Inf(1)}, Counts: []float64{0.5 * load, (1 - over) * load, load}}
	}
	// headroom is the L4s' headroom after ten and after twenty cycles
	// beside h100s H100 replicas carrying 30 req/s each within target.
	headroom := func(h100s int) (at10, at20 float64) {
		var reps []decision.ReplicaMetrics
		for i := range 2 {
			reps = append(reps, decision.ReplicaMetrics{Pod: fmt.Sprintf("l4-%d", i), Variant: "l4", AvgInputTokens: 800, AvgOutputTokens: 200,
				ArrivalRate: load, AvgITLms: fixtureITLms(load), TPOT: histogram(load, 0.03)})
		}
		for i := range h100s {
			reps = append(reps, decision.ReplicaMetrics{Pod: fmt.Sprintf("h100-%d", i), Variant: "h100", AvgInputTokens: 800, AvgOutputTokens: 200,
				ArrivalRate: 30, AvgITLms: 50, TPOT: histogram(30, 0)})
		}
		var vs VariantState
		var va VariantAnalysis
		groupOver := mergeWindow(reps).over(slo.TargetITLms, slo.TargetTTFTms)
		for i := range 20 {
			va, vs = learn(l4, reps, vs, slo, 800, 200, groupOver, false, t0.Add(time.Duration(i)*30*time.Second))
			if i == 10 {
				at10 = vs.Headroom
			}
		}
		require.Greater(t, load, va.Capacity.Rate*(1+smallShortfall), "the L4s are loaded past their rate")
		assert.InDelta(t, 0.03, va.TPOTOverTarget, 1e-9, "the variant's own share is what it reports")
		return at10, vs.Headroom
	}
	at10, alone := headroom(0)
	assert.Less(t, alone, at10, "alone, its misses are the group's and over budget")
	// 3% of the L4s' 16 req/s among 136 req/s: 0.35%, within the ITL's
	// half of the 1% budget.
	at10, beside := headroom(4)
	assert.Equal(t, at10, beside, "beside H100s within target")
	assert.Greater(t, beside, alone)
}
