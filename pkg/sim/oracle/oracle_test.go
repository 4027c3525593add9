package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestOracleMeetsTheSLO replays the oracle's plan: the policies are
// measured against it, so it must meet the attainment target it sets them,
// and cost no less than the per-interval lower bound it starts from (each
// interval from an empty fleet, which ignores the backlog handed over and
// on the embedded default met only ~94.7% replayed).
func TestOracleMeetsTheSLO(t *testing.T) {
	spike := func(t *testing.T) (scenario.Scenario, trace.Trace) {
		return shortScenario(t, scenario.ShapeSpike, 20*time.Minute, 1.5, 8)
	}
	for _, tc := range []struct {
		name string
		load func(t *testing.T) (scenario.Scenario, trace.Trace)
	}{
		{"embedded default", func(t *testing.T) (scenario.Scenario, trace.Trace) {
			sc := scenario.DefaultScenario()
			tr, err := sc.LoadTraffic()
			require.NoError(t, err)
			return sc, tr
		}},
		{"short spike", spike},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, tr := tc.load(t)
			rep, err := Run(sc, tr, Options{Policies: []string{policies.PolicyOracle}})
			require.NoError(t, err)
			require.Len(t, rep.Policies, 1)
			o := rep.Policies[0]
			bound := newPlanFleet(&sc, &tr, o.Plan.Bound, o.Plan.Interval)
			bound.Run()
			t.Logf("cost %.2f (lower bound %.2f, whose plan replayed meets %.4f), attainment %.4f, %d replays of the plan",
				o.Cost, o.LowerBound, summarize("bound", bound).SLOAttainment, o.SLOAttainment, o.Plan.Repairs)
			assert.True(t, o.Plan.Feasible)
			assert.GreaterOrEqual(t, o.SLOAttainment, sc.SLO.Attainment, "the oracle's plan replayed meets the SLO")
			assert.InDelta(t, o.Plan.Attainment, o.SLOAttainment, 1e-12, "the search's replay is the report's")
			assert.Positive(t, o.LowerBound)
			assert.GreaterOrEqual(t, o.Cost, o.LowerBound-1e-9)
			assert.InDelta(t, 1, o.CostToOracle, 1e-12)
			for i, mix := range o.Plan.Replicas {
				assert.GreaterOrEqual(t, mixCost(sc.Variants, mix), mixCost(sc.Variants, o.Plan.Bound[i])-1e-9, "interval %d below its lower bound", i)
			}
		})
	}
}

// A load the maxima cannot serve makes intervals infeasible: each counts
// once, however many of the repair replays search it again (a 10-minute
// trace once reported hundreds).
func TestOracleCountsEachInfeasibleIntervalOnce(t *testing.T) {
	sc, tr := shortScenario(t, scenario.ShapeSteady, 10*time.Minute, 20, 20)
	for v := range sc.Variants {
		sc.Variants[v].MaxReplicas = 1
	}
	plan := PlanOracle(&sc, &tr)
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
	assert.ErrorContains(t, sc.Validate(), "variants: the oracle would test up to 3.12e+05 fleets per interval")

	for i := range sc.Variants {
		sc.Variants[i].MaxReplicas = 2
	}
	require.NoError(t, sc.Validate())
	bound := scenario.MixSearch(sc.Variants)
	assert.InDelta(t, 6561, bound, 0) // 3^7 mixes x 3 bisection steps
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
	assert.InDelta(t, 78, scenario.MixSearch(def.Variants), 0, "the embedded scenario")
}
