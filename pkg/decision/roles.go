package decision

import "strings"

// RoleGroup is the part of a group that one role's variants serve.
type RoleGroup struct {
	Role  Role
	Group Group
}

// ByRole splits the group by its variants' normalized role, in the order
// both, prefill, decode, each part with only its variants and their
// replicas. The group-wide inputs (gateway arrivals, scheduler queue, Now)
// go to every part: in disaggregated serving every request passes through
// a prefill and a decode replica, so each role faces the whole demand. A
// group of one role is one part, the group itself.
func (g Group) ByRole() []RoleGroup {
	var out []RoleGroup
	for _, role := range []Role{RoleBoth, RolePrefill, RoleDecode} {
		sub := g
		sub.Variants, sub.Replicas = nil, nil
		names := map[string]bool{}
		for _, v := range g.Variants {
			if v.Role.Normalized() == role {
				sub.Variants = append(sub.Variants, v)
				names[v.Name] = true
			}
		}
		if len(sub.Variants) == 0 {
			continue
		}
		for _, r := range g.Replicas {
			if names[r.Variant] {
				sub.Replicas = append(sub.Replicas, r)
			}
		}
		out = append(out, RoleGroup{Role: role, Group: sub})
	}
	if len(out) == 1 {
		out[0].Group = g
	}
	return out
}

// JoinRoles joins the signals an analyzer computed for each part of a
// group split by ByRole (sigs[i] for parts[i]) into the group's signal:
// one RoleSignal per part, the capacities summed, the per-variant maps
// merged (variant names are unique within a group), and a hold only when
// every part holds, since a part in transition holds only its own
// variants. base carries the analyzer's name and priority.
func JoinRoles(base Signal, parts []RoleGroup, sigs []Signal) Signal {
	out := base
	out.Hold = len(parts) > 0
	var reasons []string
	for i, p := range parts {
		s := sigs[i]
		part := RoleSignal{Role: p.Role, RequiredCapacity: s.RequiredCapacity, SpareCapacity: s.SpareCapacity,
			Reason: string(p.Role) + ": " + s.Reason, Hold: s.Hold, HeldTargets: s.HeldTargets}
		for _, v := range p.Group.Variants {
			part.Variants = append(part.Variants, v.Name)
		}
		out.RequiredCapacity += s.RequiredCapacity
		out.SpareCapacity += s.SpareCapacity
		out.Hold = out.Hold && s.Hold
		out.HeldTargets = mergeInto(out.HeldTargets, s.HeldTargets)
		out.CapacityPerReplica = mergeInto(out.CapacityPerReplica, s.CapacityPerReplica)
		out.UsefulCapacityPerReplica = mergeInto(out.UsefulCapacityPerReplica, s.UsefulCapacityPerReplica)
		out.PlannedReplicas = mergeInto(out.PlannedReplicas, s.PlannedReplicas)
		out.Roles = append(out.Roles, part)
		reasons = append(reasons, part.Reason)
	}
	if !out.Hold {
		out.HeldTargets = nil
	}
	out.Reason = strings.Join(reasons, "; ")
	return out
}

func mergeInto[V any](dst, src map[string]V) map[string]V {
	if len(src) > 0 && dst == nil {
		dst = make(map[string]V, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// PrefillServiceRate is the service rate mu (requests per second) of one
// replica of a prefill variant, taken as one M/M/1 server whose mean time
// to first token at arrival rate r is 1/(mu - r): mu = r + 1/TTFT,
// arrival-weighted over the variant's replicas reporting both (an
// overloaded replica reads its throughput). A prefill replica hands its KV
// cache to a decode replica and reports no inter-token latency, so its
// TTFT is all there is to size it by. ok is false when no replica of the
// variant reports both.
func PrefillServiceRate(variant string, reps []ReplicaMetrics) (mu float64, ok bool) {
	positive := func(x float64) bool { return x > 0 && Finite(x) }
	var w, sum float64
	for _, r := range reps {
		if r.Variant == variant && positive(r.ArrivalRate) && positive(r.AvgTTFTms) {
			w += r.ArrivalRate
			sum += r.ArrivalRate * (r.ArrivalRate + 1000/r.AvgTTFTms)
		}
	}
	if w <= 0 {
		return 0, false
	}
	return sum / w, true
}
