package queueing

import (
	"fmt"
	"math"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Prefill/decode disaggregation. Prefill and decode variants are
// complements, not substitutes: every request needs a prefill replica and
// then a decode replica. So a group with more than one role is analyzed
// per role (decision.Group.ByRole, `both` variants forming a part of their
// own), each part on its own replicas: its demand is the arrivals its
// replicas see, its supply its own replicas', its anticipated supply its
// own pending replicas'. A decode replica starting then neither hides a
// prefill shortfall nor holds a prefill scale-up. The signal carries one
// part per role, which the optimizer sizes apart.

// RoleAnalysis is one role's analysis in a disaggregated group.
type RoleAnalysis struct {
	Role decision.Role `json:"role"`
	Analysis
}

// analyzeRoles analyzes each part as a group of its own. The filter state
// is per variant, and a variant is in one part only, so the parts share it.
func analyzeRoles(parts []decision.RoleGroup, qm params.QueueingModel, priority float64, tuner Tuner, st *State) (Analysis, decision.Signal) {
	an := Analysis{SLOMultiplier: qm.SLOMultiplier, TuningEnabled: qm.TuningEnabled}
	sigs := make([]decision.Signal, len(parts))
	for i, p := range parts {
		ra, rs := analyze(p.Group, qm, priority, tuner, st)
		an.Roles = append(an.Roles, RoleAnalysis{Role: p.Role, Analysis: ra})
		sigs[i] = rs
	}
	sig := decision.JoinRoles(decision.Signal{Analyzer: Name, Priority: priority}, parts, sigs)
	an.RequiredCapacity, an.SpareCapacity, an.Why = sig.RequiredCapacity, sig.SpareCapacity, sig.Reason
	return an, sig
}

// RatePrefill marks a prefill variant's rate per replica: the M/M/1 rate
// at its TTFT target.
const RatePrefill = "prefill-ttft"

// sizePrefill sizes a prefill replica by its TTFT alone: it computes the
// prompt, hands the KV cache to a decode replica and reports no ITL, so
// the filter, which learns from TTFT and ITL together, has nothing to
// learn from. It is taken as one M/M/1 server of service rate mu
// (decision.PrefillServiceRate), whose mean TTFT at rate r is 1/(mu - r):
// the rate at the target is mu - 1/target. The target is the explicit
// targetTTFT, else the observed TTFT with headroom.
func (va *VariantAnalysis) sizePrefill(v decision.Variant, reps []decision.ReplicaMetrics, qm params.QueueingModel) {
	va.ParamsSource = ParamsNone
	va.TuningSkipped = "prefill: sized by its TTFT (no ITL to learn from)"
	var w, ttft float64
	for _, r := range reps {
		if r.ArrivalRate > 0 && r.AvgTTFTms > 0 && decision.Finite(r.ArrivalRate) && decision.Finite(r.AvgTTFTms) {
			w += r.ArrivalRate
			ttft += r.ArrivalRate * r.AvgTTFTms
		}
	}
	if w > 0 {
		va.ObservedTTFTms = ttft / w
	}
	switch {
	case qm.TargetTTFTms > 0:
		va.TargetTTFTms, va.TargetSource = qm.TargetTTFTms, TargetExplicit
	case va.ObservedTTFTms > 0:
		va.TargetTTFTms, va.TargetSource = math.Min(va.ObservedTTFTms*FallbackHeadroom, FallbackMaxTTFTms), TargetFallback
	}
	mu, ok := decision.PrefillServiceRate(v.Name, reps)
	if !ok || va.TargetTTFTms <= 0 {
		va.RateSource = RateUnknown
		return
	}
	va.RatePerReplica, va.RateSource = mu-1000/va.TargetTTFTms, RatePrefill
	if va.RatePerReplica <= 0 {
		// Even alone a request misses the target; size for the
		// utilization the multiplier stands for, as size does.
		va.RatePerReplica, va.RateSource = mu*(1-1/qm.SLOMultiplier), RateIdleOnly
		va.Note = fmt.Sprintf("TTFT target %.1f ms missed even at zero load (service rate %.3f req/s); sizing at utilization %.2f",
			va.TargetTTFTms, mu, 1-1/qm.SLOMultiplier)
	}
}
