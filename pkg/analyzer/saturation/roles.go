package saturation

import (
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// analyzeRoles analyzes each role of a prefill/decode disaggregated group
// on its own replicas, and holds a role only for its own variants'
// transitions: a decode replica starting does not block a prefill
// scale-up, nor the reverse. Within a role the blocking is the model-wide
// one of a group of that role alone.
func (an Analyzer) analyzeRoles(g decision.Group, parts []decision.RoleGroup, cfg params.Resolved) (Analysis, decision.Signal) {
	a := AnalyzeReplicas(g.Replicas, cfg.Scaling)
	a.Stuck = StuckVariants(g)
	a.Roles = map[decision.Role]Analysis{}
	sigs := make([]decision.Signal, len(parts))
	for i, p := range parts {
		ra, rs := an.analyze(p.Group, cfg)
		a.Roles[p.Role] = ra
		a.InTransition = a.InTransition || ra.InTransition
		sigs[i] = rs
	}
	sig := decision.JoinRoles(decision.Signal{Analyzer: Name, Priority: cfg.Scaling.Priority}, parts, sigs)
	a.Why = sig.Reason
	return a, sig
}
