package planner

import (
	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Prefill/decode disaggregation. Prefill and decode variants are not
// substitutes: every request needs a prefill replica and then a decode
// replica. So a disaggregated group is planned per role (variants grouped
// by normalized role, variants serving whole requests forming their own
// part), each part on its own replicas against the whole demand, with its
// own memory (State.Roles); the signal's Roles keep the optimizer from
// moving capacity across roles.

// RolesAnalysis is the planner's analysis of a disaggregated group: one
// Analysis per role.
type RolesAnalysis struct {
	Roles []RoleAnalysis `json:"roles"`
}

// RoleAnalysis is one role's plan.
type RoleAnalysis struct {
	Role decision.Role `json:"role"`
	Analysis
}

// Summary implements analyzer.Summarizer.
func (a RolesAnalysis) Summary() []string {
	var lines []string
	for _, r := range a.Roles {
		lines = append(lines, analyzer.RoleSummary(r.Role, r.Analysis)...)
	}
	return lines
}

// planRoles plans each role of a group of more than one role as a group
// of its own and joins the plans in one signal.
func planRoles(g decision.Group, parts []decision.RoleGroup, cfg params.Resolved, st State) analyzer.Result {
	next := State{Analyzer: Name, Roles: map[decision.Role]State{}}
	var an RolesAnalysis
	sigs := make([]decision.Signal, len(parts))
	for i, p := range parts {
		var prev any
		if s, ok := st.Roles[p.Role]; ok {
			prev = s
		}
		// One role: AnalyzeState takes the single-role path.
		res, _ := Analyzer{}.AnalyzeState(p.Group, cfg, prev)
		next.Roles[p.Role] = res.State.(State)
		an.Roles = append(an.Roles, RoleAnalysis{Role: p.Role, Analysis: res.Details.(Analysis)})
		sigs[i] = res.Signal
	}
	sig := decision.JoinRoles(decision.Signal{Analyzer: Name, Priority: cfg.Scaling.Priority, CapacityPerReplica: map[string]float64{},
		PlannedReplicas: map[string]int32{}}, parts, sigs)
	return analyzer.Result{Signal: sig, Details: an, State: next}
}

// trimRoles is TrimOldest for a disaggregated group's memory.
func (s State) trimRoles() (any, bool) {
	roles := make(map[decision.Role]State, len(s.Roles))
	trimmed := false
	for r, rs := range s.Roles {
		t, ok := rs.TrimOldest()
		roles[r], trimmed = t.(State), trimmed || ok
	}
	s.Roles = roles
	return s, trimmed
}

// prefillCapacity is one prefill replica's request rate at the TTFT
// target. The ITL curve does not apply: a prefill replica computes the
// prompt, hands the KV cache to a decode replica and reports no ITL. It
// assumes the replica is one M/M/1 server of service rate mu (requests per
// second), whose mean time to first token at arrival rate r is 1/(mu - r):
// mu is learned from the replicas (decision.PrefillServiceRate), else
// taken from the prior that one chunk of --max-num-batched-tokens prompt
// tokens takes ttftShare of the TTFT target. The rate at the SLO is where
// the mean TTFT reaches ttftHeadroom of the target; the requests that
// fluctuate around it are those arriving within that time (RequestSeconds,
// for the planner's square-root margin).
func prefillCapacity(v decision.Variant, reps []decision.ReplicaMetrics, slo params.SLO, in float64) ReplicaCapacity {
	target := ttftHeadroom * slo.TargetTTFTms / 1000
	mu, learned := decision.PrefillServiceRate(v.Name, reps)
	bound := "ttft"
	if !learned {
		chunk := float64(v.MaxNumBatchedTokens)
		if chunk <= 0 {
			chunk = defaultMaxNumBatchedTokens
		}
		mu, bound = max(1, chunk/max(in, 1))/(ttftShare*slo.TargetTTFTms/1000), "ttft-prior"
	}
	rate := mu - 1/target
	if rate <= 0 {
		// Even alone a request misses the target: one at a time.
		rate, bound = 1/target, "ttft-infeasible"
	}
	return ReplicaCapacity{Rate: rate, Concurrency: rate * target, Bound: bound, RequestSeconds: target}
}

const (
	// ttftHeadroom keeps the mean TTFT of a prefill replica this far under
	// the target: the tail is longer than the mean.
	ttftHeadroom = 0.9
	// defaultMaxNumBatchedTokens is vLLM's default --max-num-batched-tokens.
	defaultMaxNumBatchedTokens = 8192
)
