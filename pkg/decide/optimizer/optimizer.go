// Package optimizer turns analyzer signals into per-variant replica targets.
// The cost-aware mode handles each variant group on its own: capacity is
// added where it is cheapest per unit and removed where it is dearest.
package optimizer

import (
	"fmt"
	"math"
	"sort"

	"github.com/wva-project/wva/pkg/decision"
)

// Request is one variant group and its analyzer's signal.
type Request struct {
	Group  decision.Group
	Signal decision.Signal
}

// Optimizer decides targets for all groups of one engine cycle at once, so a
// limited mode can share a budget across groups. Result i answers request i.
type Optimizer interface {
	Name() string
	Optimize(reqs []Request) [][]decision.Target
}

// CostAware is the default, unlimited mode.
type CostAware struct{}

// Name implements Optimizer.
func (CostAware) Name() string { return "cost-aware" }

// Optimize implements Optimizer.
func (CostAware) Optimize(reqs []Request) [][]decision.Target {
	out := make([][]decision.Target, len(reqs))
	for i, r := range reqs {
		out[i] = OptimizeGroup(r.Group, r.Signal)
	}
	return out
}

// OptimizeGroup applies one signal to one group. Targets come back sorted by
// variant name.
func OptimizeGroup(g decision.Group, sig decision.Signal) []decision.Target {
	variants := append([]decision.Variant(nil), g.Variants...)
	sort.Slice(variants, func(i, j int) bool { return variants[i].Name < variants[j].Name })
	if sig.Hold {
		return held(variants, sig)
	}
	if len(sig.PlannedReplicas) > 0 {
		return planned(variants, sig)
	}

	target := make(map[string]int32, len(variants))
	why := make(map[string]string, len(variants))
	rule := make(map[string]decision.Rule, len(variants))
	for _, v := range variants {
		target[v.Name] = v.CurrentReplicas
	}
	switch {
	case positive(sig.RequiredCapacity):
		addCapacity(variants, sig, target, why, rule)
	case positive(sig.SpareCapacity):
		removeCapacity(variants, sig, target, why, rule)
	}

	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n := decision.Clamp(target[v.Name], v.MinReplicas, v.MaxReplicas)
		reason, r := why[v.Name], rule[v.Name]
		switch {
		case n != target[v.Name]:
			r = decision.RuleClamped
			reason = fmt.Sprintf("clamped %d to [%d, %d]; %s", target[v.Name], v.MinReplicas, v.MaxReplicas, sig.Reason)
		case reason == "":
			r = decision.RuleSteady
			reason = "no change: " + sig.Reason
		}
		targets = append(targets, decision.Target{
			Variant: v.Name, Replicas: n, Action: decision.ActionFor(v.CurrentReplicas, n), Rule: r, Reason: reason,
		})
	}
	return targets
}

// planned applies an analyzer's exact mix: variants the plan does not name
// keep their current replicas.
func planned(variants []decision.Variant, sig decision.Signal) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		want, ok := sig.PlannedReplicas[v.Name]
		if !ok {
			want = v.CurrentReplicas
		}
		n := decision.Clamp(want, v.MinReplicas, v.MaxReplicas)
		action := decision.ActionFor(v.CurrentReplicas, n)
		rule := map[decision.Action]decision.Rule{decision.ActionScaleUp: decision.RuleScaleUp,
			decision.ActionScaleDown: decision.RuleScaleDown, decision.ActionNone: decision.RuleSteady}[action]
		reason := fmt.Sprintf("planned %d: %s", want, sig.Reason)
		if n != want {
			rule = decision.RuleClamped
			reason = fmt.Sprintf("planned %d clamped to [%d, %d]: %s", want, v.MinReplicas, v.MaxReplicas, sig.Reason)
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: n, Action: action, Rule: rule, Reason: reason})
	}
	return targets
}

func held(variants []decision.Variant, sig decision.Signal) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n, ok := sig.HeldTargets[v.Name]
		what := "preserved desired"
		if !ok || n == v.CurrentReplicas {
			n, what = v.CurrentReplicas, "preserved current"
		}
		clamped := decision.Clamp(n, v.MinReplicas, v.MaxReplicas)
		reason := fmt.Sprintf("blocked: %s %d; %s", what, n, sig.Reason)
		if clamped != n {
			reason = fmt.Sprintf("blocked: %s %d clamped to [%d, %d]; %s", what, n, v.MinReplicas, v.MaxReplicas, sig.Reason)
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: clamped, Action: decision.ActionBlocked, Rule: decision.RuleTransitionHold, Reason: reason})
	}
	return targets
}

// addCapacity adds replicas to the variants with the lowest cost per unit of
// useful capacity, or of capacity (sortByUnitCost; ties: alphabetically first), skipping variants with pending
// replicas (cascade prevention) or at their maximum, until the required
// capacity is covered or no variant is eligible.
func addCapacity(variants []decision.Variant, sig decision.Signal, target map[string]int32, why map[string]string, rule map[string]decision.Rule) {
	eligible := make([]decision.Variant, 0, len(variants))
	for _, v := range variants {
		if v.PendingReplicas == 0 && v.CurrentReplicas < v.MaxReplicas {
			eligible = append(eligible, v)
		}
	}
	sortByUnitCost(eligible, sig, false)
	remaining := sig.RequiredCapacity
	for _, v := range eligible {
		if remaining <= 0 {
			break
		}
		capacity := sig.CapacityOf(v.Name)
		add := int32(math.Min(math.Ceil(remaining/capacity), float64(v.MaxReplicas-v.CurrentReplicas)))
		target[v.Name] += add
		remaining -= float64(add) * capacity
		rule[v.Name] = decision.RuleScaleUp
		why[v.Name] = fmt.Sprintf("scale-up +%d on cheapest eligible variant (cost %.2f per replica): %s", add, v.Cost, sig.Reason)
	}
	if remaining > 0 {
		for _, v := range variants {
			if why[v.Name] == "" {
				rule[v.Name] = decision.RuleNoEligibleVariant
				why[v.Name] = fmt.Sprintf("not eligible for scale-up (pending %d, current %d, max %d); %s",
					v.PendingReplicas, v.CurrentReplicas, v.MaxReplicas, sig.Reason)
			}
		}
	}
}

// removeCapacity removes replicas from the variants with the highest cost per
// unit of useful capacity, or of capacity (ties: alphabetically last), never below max(1, min): the
// way to zero is the enforcer's scale-to-zero rule, not spare capacity.
func removeCapacity(variants []decision.Variant, sig decision.Signal, target map[string]int32, why map[string]string, rule map[string]decision.Rule) {
	eligible := make([]decision.Variant, 0, len(variants))
	for _, v := range variants {
		if v.CurrentReplicas > floorOf(v) {
			eligible = append(eligible, v)
		}
	}
	sortByUnitCost(eligible, sig, true)
	remaining := sig.SpareCapacity
	for _, v := range eligible {
		capacity := sig.CapacityOf(v.Name)
		remove := int32(math.Min(math.Floor(remaining/capacity), float64(v.CurrentReplicas-floorOf(v))))
		if remove <= 0 {
			continue
		}
		target[v.Name] -= remove
		remaining -= float64(remove) * capacity
		rule[v.Name] = decision.RuleScaleDown
		why[v.Name] = fmt.Sprintf("scale-down -%d on most expensive eligible variant (cost %.2f per replica): %s", remove, v.Cost, sig.Reason)
	}
}

func floorOf(v decision.Variant) int32 {
	if v.MinReplicas > 1 {
		return v.MinReplicas
	}
	return 1
}

// unitCost is what ranks variants: cost per unit of useful capacity when
// the signal gives it for every variant ranked, else per unit of capacity.
func unitCost(v decision.Variant, sig decision.Signal, useful bool) float64 {
	if useful {
		return v.Cost / sig.UsefulCapacityPerReplica[v.Name]
	}
	return v.Cost / sig.CapacityOf(v.Name)
}

// rankByUseful reports whether the signal gives a useful capacity for each
// of the variants (units may not be mixed within one ranking).
func rankByUseful(variants []decision.Variant, sig decision.Signal) bool {
	if len(sig.UsefulCapacityPerReplica) == 0 {
		return false
	}
	for _, v := range variants {
		if !(sig.UsefulCapacityPerReplica[v.Name] > 0) {
			return false
		}
	}
	return true
}

// sortByUnitCost orders variants cheapest per unit first (ties:
// alphabetically first), or dearest first (ties: alphabetically last).
func sortByUnitCost(variants []decision.Variant, sig decision.Signal, dearestFirst bool) {
	useful := rankByUseful(variants, sig)
	sort.SliceStable(variants, func(i, j int) bool {
		ci, cj := unitCost(variants[i], sig, useful), unitCost(variants[j], sig, useful)
		if dearestFirst {
			ci, cj = -ci, -cj
			if ci == cj {
				return variants[i].Name > variants[j].Name
			}
		}
		if ci != cj {
			return ci < cj
		}
		return variants[i].Name < variants[j].Name
	})
}

func positive(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
