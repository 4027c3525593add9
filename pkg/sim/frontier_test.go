package sim

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestStaticFrontier: the rows are named static:<n>x<variant>+<m>x<variant>,
// constant, at most frontierMaxRows, within 1.5x static-peak's cost, and
// their costs increase along the frontier.
func TestStaticFrontier(t *testing.T) {
	sc, tr := shortScenario(t, scenario.ShapeBursty, 15*time.Minute, 1.5, 5)
	rep, err := Run(sc, tr, Options{Policies: []string{policies.PolicyStaticPeak, policies.PolicyStaticFrontier}})
	require.NoError(t, err)
	require.Equal(t, policies.PolicyStaticPeak, rep.Policies[0].Policy)
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
