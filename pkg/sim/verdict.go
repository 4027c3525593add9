package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// Verdict is how wva's row compares with the other rows of a run, in the
// terms of the product's goals: attainment above the SLO's own target buys
// nothing, so attainments are capped at it before comparing.
type Verdict struct {
	// DominatedBy lists the causal rows (every row but wva's and the
	// oracle's) that reach at least wva's capped attainment for less, or a
	// better capped attainment for no more.
	DominatedBy []string `json:"dominatedBy"`
	// PeakBound is 1.5x the largest of the oracle's peak replicas, the
	// constant peak fleet's and the cheapest constant fleet meeting the
	// SLO's, plus one; 0 when none of those rows ran.
	PeakBound float64 `json:"peakBound"`
	// Overshoot says wva's peak replicas exceed PeakBound.
	Overshoot bool `json:"overshoot"`
}

// costEpsilon treats costs within it as equal (costs print to 0.1).
const costEpsilon = 1e-6

// Judge compares wva's row with the others; ok is false without a wva row.
func Judge(rep Report) (Verdict, bool) {
	wva, ok := rep.Row(policies.PolicyWVA)
	if !ok {
		return Verdict{}, false
	}
	capped := func(a float64) float64 { return math.Min(a, rep.SLO.Attainment) }
	v := Verdict{DominatedBy: []string{}}
	var peak int32
	cheapestMeeting := -1
	for i, p := range rep.Policies {
		if p.Policy == policies.PolicyWVA {
			continue
		}
		if p.Policy == policies.PolicyOracle || p.Policy == policies.PolicyStaticPeak {
			peak = max(peak, p.MaxReplicas)
		}
		if p.Policy == policies.PolicyOracle {
			continue
		}
		if isConstant(p.Policy) && p.SLOAttainment >= rep.SLO.Attainment &&
			(cheapestMeeting < 0 || p.Cost < rep.Policies[cheapestMeeting].Cost) {
			cheapestMeeting = i
		}
		better := capped(p.SLOAttainment) > capped(wva.SLOAttainment)
		asGood := capped(p.SLOAttainment) >= capped(wva.SLOAttainment)
		if (asGood && p.Cost < wva.Cost-costEpsilon) || (better && p.Cost <= wva.Cost+costEpsilon) {
			v.DominatedBy = append(v.DominatedBy, p.Policy)
		}
	}
	if cheapestMeeting >= 0 {
		peak = max(peak, rep.Policies[cheapestMeeting].MaxReplicas)
	}
	if peak > 0 {
		v.PeakBound = 1.5*float64(peak) + 1
		v.Overshoot = float64(wva.MaxReplicas) > v.PeakBound
	}
	return v, true
}

// isConstant says a row is a constant fleet.
func isConstant(policy string) bool {
	return policy == policies.PolicyStaticPeak || oracle.IsFrontierRow(policy)
}

// Row is the report's row of the named policy.
func (rep Report) Row(policy string) (PolicySummary, bool) {
	for _, p := range rep.Policies {
		if p.Policy == policy {
			return p, true
		}
	}
	return PolicySummary{}, false
}

// String is the verdict in one line, naming the first rows that dominate.
func (v Verdict) String() string {
	var b strings.Builder
	switch n := len(v.DominatedBy); {
	case n == 0:
		b.WriteString("not dominated")
	case n <= 3:
		fmt.Fprintf(&b, "dominated by %s", strings.Join(v.DominatedBy, ", "))
	default:
		fmt.Fprintf(&b, "dominated by %s and %d more", strings.Join(v.DominatedBy[:3], ", "), n-3)
	}
	if v.PeakBound > 0 {
		word := "within"
		if v.Overshoot {
			word = "OVER"
		}
		fmt.Fprintf(&b, "; peak replicas %s the bound %.1f", word, v.PeakBound)
	}
	return b.String()
}
