package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// frontierSeriesName names a frontier in the text and HTML reports: the
// policy's, or "constant fleets" for the static rows' (whichever row holds
// it).
func frontierSeriesName(p sim.PolicySummary) string {
	if p.Frontier.Knob == sim.StaticKnob {
		return "constant fleets"
	}
	return p.Policy
}

// adaptivePolicies are the policies goal 4 ranks wva among.
var adaptivePolicies = []string{policies.PolicyWVA, policies.PolicyWVAV1, policies.PolicyWVAThroughput, policies.PolicyQueueThreshold, policies.PolicyKPA}

// FrontierRanking says, per level, whether wva's cost to reach it is the
// lowest of the adaptive policies that reach it.
func FrontierRanking(rep sim.Report) string {
	var parts []string
	for _, level := range []struct {
		name string
		cost func(*sim.Frontier) *float64
	}{
		{"95%", func(f *sim.Frontier) *float64 { return f.CostAt95 }},
		{"99%", func(f *sim.Frontier) *float64 { return f.CostAt99 }},
	} {
		// The adaptive policies reaching the level, in report order.
		var wva *float64
		var peers []sim.PolicySummary
		for _, p := range rep.Policies {
			if p.Frontier == nil || !slices.Contains(adaptivePolicies, p.Policy) || level.cost(p.Frontier) == nil {
				continue
			}
			if p.Policy == policies.PolicyWVA {
				wva = level.cost(p.Frontier)
			} else {
				peers = append(peers, p)
			}
		}
		var cheaper []string
		for _, p := range peers {
			if c := level.cost(p.Frontier); wva == nil || *c < *wva-1e-9 {
				cheaper = append(cheaper, fmt.Sprintf("%s %.1f", p.Policy, *c))
			}
		}
		switch {
		case wva == nil && len(peers) == 0:
			parts = append(parts, level.name+": no adaptive policy reaches it")
		case wva == nil:
			parts = append(parts, level.name+": wva never reaches it (reached by "+strings.Join(cheaper, ", ")+")")
		case len(cheaper) == 0:
			parts = append(parts, fmt.Sprintf("%s: wva cheapest (%.1f)", level.name, *wva))
		default:
			parts = append(parts, fmt.Sprintf("%s: wva %.1f, cheaper: %s", level.name, *wva, strings.Join(cheaper, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

// frontierCost formats a frontier cost, "-" where never reached.
func frontierCost(c *float64) string {
	if c == nil {
		return "-"
	}
	return strconv.FormatFloat(*c, 'f', 1, 64)
}
