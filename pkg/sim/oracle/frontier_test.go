package oracle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// TestStaticFrontierIsTheCheapestPerCapacity checks the unthinned frontier
// against every mix: none costing as much or less has more capacity.
func TestStaticFrontierIsTheCheapestPerCapacity(t *testing.T) {
	sc := scenario.DefaultScenario()
	stats := trace.Stats{MeanInputTokens: 1000, MeanOutputTokens: 200}
	l40s, h100 := fleet.ServerThroughput(sc.Variants[0].Server, 1000, 200), fleet.ServerThroughput(sc.Variants[1].Server, 1000, 200)
	require.Greater(t, l40s, 0.0)
	require.Greater(t, h100, l40s, "the H100 serves more")
	const maxCost = 120
	front := StaticFrontier(&sc, stats, maxCost, 0)
	require.NotEmpty(t, front)
	for i, m := range front {
		if i > 0 {
			assert.Greater(t, m.Cost, front[i-1].Cost)
			assert.Greater(t, m.Capacity, front[i-1].Capacity)
		}
		for a := sc.Variants[0].MinReplicas; a <= sc.Variants[0].MaxReplicas; a++ {
			for b := sc.Variants[1].MinReplicas; b <= sc.Variants[1].MaxReplicas; b++ {
				cost := MixCost(sc.Variants, []int32{a, b})
				if cost <= m.Cost && float64(a)*l40s+float64(b)*h100 > m.Capacity*(1+1e-9) {
					t.Errorf("%v (cost %g) has more capacity than frontier mix %v (cost %g)", []int32{a, b}, cost, m.Mix, m.Cost)
				}
			}
		}
	}
	assert.Len(t, StaticFrontier(&sc, stats, maxCost, 5), 5)
	assert.Equal(t, "static:3xllama-70b-l40s+1xllama-70b-h100", FrontierName(&sc, []int32{3, 1}))
}
