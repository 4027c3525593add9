package decision

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
