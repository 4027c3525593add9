// Package scalefromzero is `wva scale-from-zero`: it watches variant groups
// whose targets are all at zero replicas, reads the EPP flow-control queue
// of their models straight from the EPP pods' /metrics, and scales the
// cheapest variant that fits the GPU budget to one replica through the
// scale subresource. An optional activator holds OpenAI-style requests
// while a model wakes up, for setups without an EPP.
//
// Decision code (this file, budget/) is pure; the I/O edges are the EPP
// scraper (epp.go), the scaler (scaler.go), informer-backed state
// (state.go) and the waker that ties them together (waker.go).
package scalefromzero

import (
	"fmt"
	"sort"
	"strings"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/decision"
)

// GroupKey identifies a variant group: the VAs of one namespace sharing a
// modelID.
type GroupKey struct {
	Namespace string
	ModelID   string
}

func (k GroupKey) String() string { return k.Namespace + "/" + k.ModelID }

// Variant is one VA of a group with its resolved scale target.
type Variant struct {
	// Name of the VA.
	Name string
	// VA is the object, for events and the wake marker.
	VA   *llmdv1alpha1.VariantAutoscaling
	Cost float64
	// Replicas is the target's spec.replicas.
	Replicas int32
	Target   Target
	// Pool the variant belongs to ("" = no budget applies).
	Pool string
	// Need is what one replica takes from the pool.
	Need budget.Amount
	// PodLabels are the target's pod template labels, which an
	// InferencePool's selector matches.
	PodLabels map[string]string
}

// Group is a variant group whose targets resolved.
type Group struct {
	Key      GroupKey
	Variants []Variant
}

// AtZero reports whether every variant of the group is at zero replicas:
// only then do queued requests have nowhere to go.
func (g Group) AtZero() bool {
	if len(g.Variants) == 0 {
		return false
	}
	for _, v := range g.Variants {
		if v.Replicas > 0 {
			return false
		}
	}
	return true
}

// WakeOrder is the group's variants cheapest first (decision.Cheaper, the
// enforcer's order too).
func (g Group) WakeOrder() []Variant {
	vs := append([]Variant(nil), g.Variants...)
	sort.Slice(vs, func(i, j int) bool { return decision.Cheaper(vs[i].Cost, vs[i].Name, vs[j].Cost, vs[j].Name) })
	return vs
}

// Result of a decision.
type Result string

// Results, also the `result` label of the decisions metric.
const (
	ResultScaled        Result = "scaled"
	ResultAlreadyScaled Result = "already_scaled"
	ResultBlocked       Result = "budget_blocked"
	ResultNoVariant     Result = "no_variant"
	ResultError         Result = "error"
)

// Skip is a cheaper variant passed over because its wake was not admitted.
type Skip struct {
	Variant string
	Pool    string
	// Reason is the admission's (budget.Ledger.Admit), naming the pool's
	// holders with their models, or the namespace quota.
	Reason string
}

func (s Skip) String() string { return s.Reason }

// Decision says which variant of a group at zero to wake.
type Decision struct {
	Result Result
	// Variant to scale to one (ResultScaled).
	Variant Variant
	// Skipped are cheaper variants that did not fit, cheapest first.
	Skipped []Skip
	// Blockers hold the budget of the pools that refused every variant
	// (ResultBlocked), largest first, with their namespaces and models.
	Blockers []budget.Holder
	// Quotas are the namespace quotas that refused a variant (ResultBlocked).
	Quotas []budget.Quota
}

// Choose picks the cheapest variant (ties: alphabetical) whose 0 -> 1 wake
// the ledger admits: the engine's admission (its pool's GPUs and GPU
// memory, its namespace's GPU quota, --unbudgeted-variants). l is nil when
// no budget is configured: the cheapest variant wins.
func Choose(g Group, l *budget.Ledger) Decision {
	vs := g.WakeOrder()
	if len(vs) == 0 {
		return Decision{Result: ResultNoVariant}
	}
	var d Decision
	var blockers []budget.Holder
	var quotas []budget.Quota
	seen := map[string]bool{}
	for _, v := range vs {
		if l == nil {
			d.Result, d.Variant = ResultScaled, v
			return d
		}
		key := g.Key.Namespace + "/" + v.Name
		a := l.Admit(budget.Variant{Key: key, Namespace: g.Key.Namespace, Pool: v.Pool, PerReplica: v.Need}, 0, 1)
		if !a.Cut() {
			d.Result, d.Variant = ResultScaled, v
			return d
		}
		d.Skipped = append(d.Skipped, Skip{Variant: v.Name, Pool: v.Pool, Reason: a.Reason})
		if a.Quota != nil {
			quotas = append(quotas, *a.Quota)
		}
		for _, h := range a.Blockers {
			if !seen[h.Name] {
				seen[h.Name] = true
				blockers = append(blockers, h)
			}
		}
	}
	d.Result, d.Blockers, d.Quotas = ResultBlocked, blockers, quotas
	budget.SortHolders(d.Blockers)
	return d
}

// HolderNames renders holders for events and logs:
// "prod/llama-h100 (6 GPUs), pod prod/batch-0 (1 GPUs)".
func HolderNames(h []budget.Holder) string {
	if len(h) == 0 {
		return "nothing"
	}
	parts := make([]string, 0, len(h))
	for _, x := range h {
		parts = append(parts, fmt.Sprintf("%s (%s)", x.Name, x.Amount))
	}
	return strings.Join(parts, ", ")
}
