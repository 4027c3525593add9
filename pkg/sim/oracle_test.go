package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestOracleMeetsTheSLO replays the oracle's plan: the policies are
// measured against it, so it must meet the attainment target it sets them,
// and cost no less than the per-interval lower bound it starts from (each
// interval from an empty fleet, which ignores the backlog handed over and
// on the embedded default met only ~94.7% replayed).
func TestOracleMeetsTheSLO(t *testing.T) {
	spike := func(t *testing.T) (scenario.Scenario, trace.Trace) {
		return simtest.ShortScenario(t, scenario.ShapeSpike, 20*time.Minute, 1.5, 8)
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
			bound := oracle.NewPlanFleet(&sc, &tr, o.Plan.Bound, o.Plan.Interval)
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
				assert.GreaterOrEqual(t, oracle.MixCost(sc.Variants, mix), oracle.MixCost(sc.Variants, o.Plan.Bound[i])-1e-9, "interval %d below its lower bound", i)
			}
		})
	}
}
