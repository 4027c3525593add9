package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestOracleMeetsTheSLO replays the oracle's plan: the policies are
// measured against it, so it must meet the attainment target it sets them,
// and cost no less than the per-interval lower bound it starts from (each
// interval from an empty fleet, which ignores the backlog handed over and
// on the embedded default met only ~94.7% replayed).
func TestOracleMeetsTheSLO(t *testing.T) {
	spike := func(t *testing.T) (Scenario, trace.Trace) {
		return shortScenario(t, ShapeSpike, 20*time.Minute, 1.5, 8)
	}
	for _, tc := range []struct {
		name string
		load func(t *testing.T) (Scenario, trace.Trace)
	}{
		{"embedded default", func(t *testing.T) (Scenario, trace.Trace) {
			sc := DefaultScenario()
			tr, err := sc.LoadTraffic()
			require.NoError(t, err)
			return sc, tr
		}},
		{"short spike", spike},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, tr := tc.load(t)
			rep, err := Run(sc, tr, Options{Policies: []string{PolicyOracle}})
			require.NoError(t, err)
			require.Len(t, rep.Policies, 1)
			o := rep.Policies[0]
			bound := newPlanFleet(&sc, &tr, o.Plan.Bound, o.Plan.Interval)
			bound.run()
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
	sc, tr := shortScenario(t, ShapeSteady, 10*time.Minute, 20, 20)
	for v := range sc.Variants {
		sc.Variants[v].MaxReplicas = 1
	}
	plan := PlanOracle(&sc, &tr)
	plan.MakeFeasible(&sc, &tr)
	intervals := len(plan.Replicas)
	assert.Positive(t, plan.Infeasible)
	assert.LessOrEqual(t, plan.Infeasible, intervals, "%d infeasible of %d intervals after %d repairs", plan.Infeasible, intervals, plan.Repairs)
}
