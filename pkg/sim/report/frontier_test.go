package report

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/sim"
)

func costOf(v float64) *float64 { return &v }

func TestFrontierRanking(t *testing.T) {
	row := func(policy string, at95, at99 *float64) sim.PolicySummary {
		return sim.PolicySummary{Policy: policy, Frontier: &sim.Frontier{CostAt95: at95, CostAt99: at99}}
	}
	cases := []struct {
		name string
		rows []sim.PolicySummary
		want string
	}{
		{"wva cheapest", []sim.PolicySummary{row("wva", costOf(40), costOf(50)), row("kpa", costOf(60), nil)},
			"95%: wva cheapest (40.0); 99%: wva cheapest (50.0)"},
		{"a peer is cheaper", []sim.PolicySummary{row("wva", costOf(40), costOf(50)), row("kpa", costOf(30), costOf(70))},
			"95%: wva 40.0, cheaper: kpa 30.0; 99%: wva cheapest (50.0)"},
		{"wva never reaches it", []sim.PolicySummary{row("wva", costOf(40), nil), row("queue-threshold", costOf(45), costOf(80))},
			"95%: wva cheapest (40.0); 99%: wva never reaches it (reached by queue-threshold 80.0)"},
		{"constant fleets are not adaptive", []sim.PolicySummary{row("wva", nil, nil), row("static-peak", costOf(10), costOf(20))},
			"95%: no adaptive policy reaches it; 99%: no adaptive policy reaches it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, FrontierRanking(sim.Report{Policies: tc.rows}))
		})
	}
}
