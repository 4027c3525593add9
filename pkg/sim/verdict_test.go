package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJudge(t *testing.T) {
	row := func(policy string, cost, att float64, peak int32) PolicySummary {
		return PolicySummary{Policy: policy, Cost: cost, SLOAttainment: att, MaxReplicas: peak}
	}
	cases := []struct {
		name      string
		rows      []PolicySummary
		dominated []string
		bound     float64
		overshoot bool
	}{
		{
			name: "a cheaper constant fleet meeting the SLO dominates",
			rows: []PolicySummary{row("wva", 52, 0.9998, 5), row("static-peak", 48, 0.9982, 3),
				row("static:5xa", 40, 0.9896, 5), row("oracle", 27.7, 0.9955, 5)},
			dominated: []string{"static-peak"}, bound: 1.5*5 + 1,
		},
		{
			name:      "attainment above the target buys nothing, below it counts",
			rows:      []PolicySummary{row("wva", 40, 0.995, 4), row("static:4xa", 32, 0.98, 4), row("static:6xa", 48, 0.9999, 6)},
			dominated: []string{}, bound: 1.5*6 + 1,
		},
		{
			name:      "better for the same cost dominates; the oracle never does",
			rows:      []PolicySummary{row("wva", 54.4, 0.64, 8), row("static:3xa+1xb", 54.4, 0.946, 4), row("oracle", 18.8, 0.9956, 5)},
			dominated: []string{"static:3xa+1xb"}, bound: 1.5*5 + 1,
		},
		{
			name:      "peaks past the bound are overshoot",
			rows:      []PolicySummary{row("wva", 64, 0.70, 19), row("static-peak", 40, 0.9786, 5), row("oracle", 17.7, 0.9956, 5)},
			dominated: []string{"static-peak"}, bound: 8.5, overshoot: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := Judge(Report{SLO: SLOSummary{Attainment: 0.99}, Policies: tc.rows})
			require.True(t, ok)
			assert.Equal(t, tc.dominated, v.DominatedBy)
			assert.InDelta(t, tc.bound, v.PeakBound, 1e-9)
			assert.Equal(t, tc.overshoot, v.Overshoot)
		})
	}
	_, ok := Judge(Report{Policies: []PolicySummary{row("static-peak", 1, 1, 1)}})
	assert.False(t, ok, "no wva row, no verdict")
}
