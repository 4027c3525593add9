package decision

// Signal is an analyzer's verdict on one variant group, in the analyzer's own
// capacity unit (replicas for the percentage analyzer, tokens for the
// token-based one). The optimizer turns it into per-variant targets.
type Signal struct {
	Analyzer string
	// Hold means no new decision may be made for the group (it is in
	// transition); HeldTargets says what each variant keeps.
	Hold        bool
	HeldTargets map[string]int32
	// RequiredCapacity > 0 asks the optimizer to add at least this much.
	RequiredCapacity float64
	// SpareCapacity > 0 allows the optimizer to remove up to this much.
	SpareCapacity float64
	// CapacityPerReplica is what one replica of each variant contributes, in
	// the same unit; a variant absent from the map counts as 1.
	CapacityPerReplica map[string]float64
	// UsefulCapacityPerReplica, when set, is what one replica of each
	// variant serves (not merely holds), in any unit common to the group's
	// variants. The optimizer then ranks variants by cost per unit of it
	// (cheapest first on scale-up, dearest first on scale-down) and keeps
	// CapacityPerReplica for the arithmetic. When a variant being ranked
	// is absent from it, all are ranked by CapacityPerReplica (units are
	// never mixed).
	UsefulCapacityPerReplica map[string]float64
	// PlannedReplicas, when set, is the exact replica count the analyzer
	// planned for each variant it names (the planner's cheapest mix); the
	// optimizer applies it as is, within min/max, and keeps
	// RequiredCapacity / SpareCapacity for budget-limited groups.
	PlannedReplicas map[string]int32
	// Priority orders groups when the GPU limiter has to cut (default 1).
	Priority float64
	// Reason is a sentence a person can read.
	Reason string
	// Roles, when set, splits the signal of a prefill/decode disaggregated
	// group: each part concerns only the variants it names, and the
	// optimizer treats each part as a group of its own. RequiredCapacity and
	// SpareCapacity above are then the sums over the parts.
	Roles []RoleSignal
}

// RoleSignal is the part of a signal that concerns the variants of one role.
type RoleSignal struct {
	Role             Role
	Variants         []string
	RequiredCapacity float64
	SpareCapacity    float64
	Reason           string
	// Hold and HeldTargets hold this role's variants only: one role in
	// transition does not block the others.
	Hold        bool
	HeldTargets map[string]int32
}

// CapacityOf returns the capacity of one replica of the variant.
func (s Signal) CapacityOf(variant string) float64 {
	if c, ok := s.CapacityPerReplica[variant]; ok && c > 0 {
		return c
	}
	return 1
}
