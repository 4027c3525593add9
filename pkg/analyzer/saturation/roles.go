package saturation

import (
	"strings"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
)

// analyzeRoles analyzes each role of a prefill/decode disaggregated group
// on its own replicas, and holds a role only for its own variants'
// transitions: a decode replica starting does not block a prefill
// scale-up, nor the reverse. Within a role the blocking is the model-wide
// one of a group of that role alone.
func (an Analyzer) analyzeRoles(g decision.Group, parts []decision.RoleGroup, cfg config.Resolved) (Analysis, decision.Signal) {
	a := AnalyzeReplicas(g.Replicas, cfg.Saturation)
	a.Stuck = StuckVariants(g)
	a.Roles = map[decision.Role]Analysis{}
	sig := decision.Signal{Analyzer: Name, Priority: cfg.Saturation.Priority, Hold: true, HeldTargets: map[string]int32{}}
	var reasons []string
	for _, p := range parts {
		ra, rs := an.analyze(p.Group, cfg)
		a.Roles[p.Role] = ra
		a.InTransition = a.InTransition || ra.InTransition
		part := decision.RoleSignal{Role: p.Role, RequiredCapacity: rs.RequiredCapacity, SpareCapacity: rs.SpareCapacity,
			Reason: string(p.Role) + ": " + rs.Reason, Hold: rs.Hold, HeldTargets: rs.HeldTargets}
		for _, v := range p.Group.Variants {
			part.Variants = append(part.Variants, v.Name)
		}
		for n, r := range rs.HeldTargets {
			sig.HeldTargets[n] = r
		}
		sig.Hold = sig.Hold && rs.Hold
		sig.RequiredCapacity += rs.RequiredCapacity
		sig.SpareCapacity += rs.SpareCapacity
		sig.Roles = append(sig.Roles, part)
		reasons = append(reasons, part.Reason)
	}
	if !sig.Hold {
		sig.HeldTargets = nil
	}
	sig.Reason = strings.Join(reasons, "; ")
	a.Why = sig.Reason
	return a, sig
}
