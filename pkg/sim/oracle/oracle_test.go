package oracle

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// A load the maxima cannot serve makes intervals infeasible: each counts
// once, however many of the repair replays search it again (a 10-minute
// trace once reported hundreds).
func TestOracleCountsEachInfeasibleIntervalOnce(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSteady, 10*time.Minute, 20, 20)
	for v := range sc.Variants {
		sc.Variants[v].MaxReplicas = 1
	}
	plan := NewPlan(&sc, &tr)
	plan.MakeFeasible(&sc, &tr)
	intervals := len(plan.Replicas)
	assert.Positive(t, plan.Infeasible)
	assert.LessOrEqual(t, plan.Infeasible, intervals, "%d infeasible of %d intervals after %d repairs", plan.Infeasible, intervals, plan.Repairs)
}

// TestManyVariants: the oracle's exact mix search is exponential in the
// variants, so a scenario with 20 is refused, and within the bounds the
// search tests at most MaxMixSearch fleets per interval.
func TestManyVariants(t *testing.T) {
	def := scenario.DefaultScenario()
	sc := def
	sc.Variants = nil
	for i := range 20 {
		v := def.Variants[i%2]
		v.Name = string(rune('a'+i)) + "-" + v.Name
		v.MinReplicas, v.MaxReplicas, v.InitialReplicas = 0, 4, 0
		sc.Variants = append(sc.Variants, v)
	}
	assert.ErrorContains(t, sc.Validate(), "variants: 20 variants: at most 8")

	sc.Variants = sc.Variants[:scenario.MaxVariants]
	assert.ErrorContains(t, sc.Validate(), "variants: the oracle would test up to 5.47e+05 fleets per interval")

	for i := range sc.Variants {
		sc.Variants[i].MaxReplicas = 2
	}
	require.NoError(t, sc.Validate())
	bound := scenario.MixSearch(sc.Variants)
	assert.InDelta(t, 10935, bound, 0) // 3^7 mixes x 5 search steps
	for _, tt := range []struct {
		name   string
		passes func(mix []int32) bool
	}{
		{"nothing passes", func([]int32) bool { return false }},
		{"everything passes", func([]int32) bool { return true }},
		{"only the maxima pass", func(mix []int32) bool {
			var n int32
			for _, r := range mix {
				n += r
			}
			return n >= 16
		}},
		{"the first variant is useless", func(mix []int32) bool { return mix[scenario.MaxVariants-1] >= 2 }},
	} {
		calls := 0
		cheapestMix(sc.Variants, func(mix []int32) bool { calls++; return tt.passes(mix) })
		assert.LessOrEqual(t, float64(calls), bound, tt.name)
	}
	assert.InDelta(t, 143, scenario.MixSearch(def.Variants), 0, "the embedded scenario")
}

func TestCheapestMix(t *testing.T) {
	vs := []scenario.VariantSpec{{Name: "a", Cost: 8, MaxReplicas: 10}, {Name: "b", Cost: 20, MaxReplicas: 4}}
	covers := func(capacity []float64, demand float64) func([]int32) bool {
		return func(mix []int32) bool {
			var c float64
			for v, n := range mix {
				c += float64(n) * capacity[v]
			}
			return c+1e-9 >= demand
		}
	}
	mix, ok := cheapestMix(vs, covers([]float64{1, 3}, 2.5))
	assert.True(t, ok)
	assert.Equal(t, []int32{0, 1}, mix, "one b (20) covers 2.5 for less than three a (24)")
	mix, _ = cheapestMix(vs, covers([]float64{1, 3}, 3))
	assert.Equal(t, []int32{0, 1}, mix)
	mix, _ = cheapestMix(vs, covers([]float64{1, 3}, 7))
	assert.Equal(t, []int32{1, 2}, mix, "1a+2b (48) beats 4a+1b (52), 7a (56) and 3b (60): %v", mix)
	mix, ok = cheapestMix(vs, covers([]float64{1, 3}, 100))
	assert.False(t, ok)
	assert.Equal(t, []int32{10, 4}, mix)
	vs[0].MinReplicas = 1
	mix, _ = cheapestMix(vs, covers([]float64{1, 3}, 0))
	assert.Equal(t, []int32{1, 0}, mix, "minReplicas hold when idle")

	// Against brute force over every mix: same cost, within the tests
	// MixSearch bounds.
	vs = []scenario.VariantSpec{{Name: "a", Cost: 8, MaxReplicas: 24}, {Name: "b", Cost: 20, MaxReplicas: 12}}
	asBruteForce := func(passes func([]int32) bool, demand float64) {
		calls := 0
		mix, ok := cheapestMix(vs, func(m []int32) bool { calls++; return passes(m) })
		assert.LessOrEqual(t, float64(calls), scenario.MixSearch(vs), "demand %v", demand)
		best := math.Inf(1)
		for a := range vs[0].MaxReplicas + 1 {
			for b := range vs[1].MaxReplicas + 1 {
				if passes([]int32{a, b}) {
					best = math.Min(best, MixCost(vs, []int32{a, b}))
				}
			}
		}
		if math.IsInf(best, 1) {
			assert.False(t, ok, "demand %v", demand)
			return
		}
		assert.True(t, ok, "demand %v", demand)
		assert.InDelta(t, best, MixCost(vs, mix), 1e-9, "demand %v: %v", demand, mix)
		assert.True(t, passes(mix), "demand %v: %v", demand, mix)
	}
	for demand := 0.0; demand <= 60; demand += 1.7 {
		asBruteForce(covers([]float64{1, 2.4}, demand), demand)
	}

	// Too many of the slower variant fail a fleet that fewer pass (long
	// prompts routed to it miss the TTFT target): the search must not
	// conclude from the maxima failing that nothing passes. Here a fleet
	// passes with the fewest of the first variant that cover the demand
	// and up to twice as many, but not with more.
	slowWindow := func(demand float64) func([]int32) bool {
		return func(mix []int32) bool {
			need := int32(max(0, math.Ceil(demand-2.4*float64(mix[1])-1e-9)))
			return mix[0] >= need && mix[0] <= 2*need+1
		}
	}
	for demand := 0.0; demand <= 40; demand += 1.3 {
		asBruteForce(slowWindow(demand), demand)
	}
}

// TestSpikeOutrunsStartup measures why no reactive policy meets the SLO on
// the default spike (2 -> 9 req/s at minute 20 for 10 minutes): a replica
// asked for at the spike's first second is Ready 3 minutes later at the
// earliest (the H100's start-up; the L40S needs 4). Until then the fleet is
// what was there before the spike. Held at the oracle's plan for the
// minute before the spike, that fleet leaves requests that were already
// past their TTFT target before any new replica could serve them; those are
// lost whatever the policy does afterwards. More than 1% of the hour's
// requests means 99% needs capacity held ahead of the spike.
func TestSpikeOutrunsStartup(t *testing.T) {
	sc := scenario.DefaultScenario()
	syn := *sc.Traffic.Synthetic
	syn.Shape = scenario.ShapeSpike
	sc.Traffic.Synthetic = &syn
	tr, err := sc.LoadTraffic()
	require.NoError(t, err)
	plan := NewPlan(&sc, &tr)
	// Paying for replicas from 3 minutes before they serve costs more
	// around the spike, and never less than the plan, nor more than its
	// peak held throughout.
	assert.Greater(t, plan.StartupCost, plan.Cost)
	assert.LessOrEqual(t, plan.StartupCost, MixCost(sc.Variants, plan.Peak)*float64(len(plan.Replicas))*plan.Interval.Hours()+1e-9)
	start := time.Duration(syn.WithDefaults().SpikeStart)
	before := plan.Replicas[int(start/plan.Interval)-1]
	var fastest time.Duration = -1
	for _, v := range sc.Variants {
		if fastest < 0 || v.StartupDelay.D() < fastest {
			fastest = v.StartupDelay.D()
		}
	}
	ready := start + fastest
	lostWith := func(fleetMix []int32) int {
		f := fleet.New(&sc, &tr, policies.Static{}, fleetMix)
		f.Run()
		lost := 0
		for i, r := range tr.Requests {
			ttft, done := f.TTFT(i)
			late := !done || ttft > sc.SLO.TTFT.D().Seconds()
			if r.Arrival >= start && r.Arrival+sc.SLO.TTFT.D() <= ready && late {
				lost++
			}
		}
		return lost
	}
	lost := lostWith(before)
	frac := float64(lost) / float64(len(tr.Requests))
	t.Logf("fleet before the spike %v; requests past their TTFT target before %s: %d of %d (%.2f%%): attainment <= %.2f%% for a policy holding that fleet",
		before, ready, lost, len(tr.Requests), 100*frac, 100*(1-frac))
	assert.Greater(t, frac, 1-sc.SLO.Attainment, "the spike must outrun the start-up delay for this test to mean anything")
	// The L40S a policy must already hold when the spike starts to lose
	// no more than 1% of the hour's requests this way.
	held := slices.Clone(before)
	for ; held[0] < sc.Variants[0].MaxReplicas; held[0]++ {
		if float64(lostWith(held)) <= (1-sc.SLO.Attainment)*float64(len(tr.Requests)) {
			break
		}
	}
	t.Logf("to stay within 1%%, hold %v before the spike (%.0f per hour against %.0f for the minute before)",
		held, MixCost(sc.Variants, held), MixCost(sc.Variants, before))
	assert.Greater(t, MixCost(sc.Variants, held), MixCost(sc.Variants, before))
}

func TestWarmWindow(t *testing.T) {
	const lead, end = 2 * time.Minute, time.Hour
	for _, tt := range []struct {
		name     string
		warmup   time.Duration
		mode     string
		from, to time.Duration
	}{
		{"mirrored: the lead before the warm-up's end, played first", 10 * time.Minute, scenario.WarmupMirror, 8 * time.Minute, 10 * time.Minute},
		{"replayed: the trace's start", 10 * time.Minute, scenario.WarmupReplay, 0, lead},
		{"no warm-up: the trace's start", -1, scenario.WarmupMirror, 0, lead},
		{"mirrored, shorter than the lead: the warm-up and the run's start", time.Minute, scenario.WarmupMirror, 0, time.Minute},
		{"mirrored, longer than the trace: its last lead", 2 * time.Hour, scenario.WarmupMirror, end - lead, end},
	} {
		c := scenario.Control{Warmup: params.Duration(tt.warmup), WarmupMode: tt.mode}
		from, to := warmWindow(c, lead, end)
		assert.Equal(t, tt.from, from, tt.name)
		assert.Equal(t, tt.to, to, tt.name)
	}
}

// The policies start from the fleet the minutes they play first need: a
// mirrored warm-up starts at the trace's 10th minute, which here is four
// times as busy as its first, and a fleet sized for the first would meet
// it with a queue (and every policy with a memory of misses the measured
// run then inherits).
func TestWarmFleetMeetsTheMinutesPlayedFirst(t *testing.T) {
	sc := scenario.DefaultScenario()
	var tr trace.Trace
	for at := time.Duration(0); at < 12*time.Minute; {
		rate := 4.0 // req/s
		if at >= 7*time.Minute {
			rate = 16
		}
		tr.Requests = append(tr.Requests, trace.Request{Arrival: at, Input: 1000, Output: 200})
		at += time.Duration(float64(time.Second) / rate)
	}
	warm := func(mode string) float64 {
		sc.Control.WarmupMode = mode
		plan := NewPlan(&sc, &tr)
		return MixCost(sc.Variants, plan.Warm)
	}
	first, tenth := warm(scenario.WarmupReplay), warm(scenario.WarmupMirror)
	assert.Greater(t, tenth, first, "mirrored: sized for the 10th minute, not the first")
}
