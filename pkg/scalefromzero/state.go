package scalefromzero

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/budget"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/inventory"
)

// Snapshot is the groups and, when asked for, the budget, as of one read of
// the informer caches.
type Snapshot struct {
	Groups map[GroupKey]Group
	// Usage per pool; nil when no budget is configured or none was asked.
	Usage map[string]budget.Usage
	// Budgeted: the budget was read (Usage may still be nil: no pool).
	Budgeted bool
	// Quotas are the namespaces' GPU quotas, used raised to what their
	// variants hold by spec (budget.EffectiveQuotas).
	Quotas []budget.Quota
}

// Ledger admits the snapshot's wakes with policy for unbudgeted variants;
// nil when the budget was not read (no admission).
func (s Snapshot) Ledger(policy budget.Unbudgeted) *budget.Ledger {
	if !s.Budgeted {
		return nil
	}
	models := map[string]string{}
	for _, g := range s.Groups {
		for _, v := range g.Variants {
			models[g.Key.Namespace+"/"+v.Name] = g.Key.ModelID
		}
	}
	return budget.NewLedger(s.Usage, policy, models).WithQuotas(s.Quotas)
}

// ZeroGroups returns the groups whose targets are all at zero, sorted.
func (s Snapshot) ZeroGroups() []Group {
	var out []Group
	for _, g := range s.Groups {
		if g.AtZero() {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// StateSource reads groups (and the budget) from somewhere.
type StateSource interface {
	// Snapshot reads every group; withBudget also computes pool usage,
	// counting the variants in reserved ("namespace/name") as holding at
	// least one replica (scaled up, not yet seen by the informer).
	Snapshot(withBudget bool, reserved map[string]bool) (Snapshot, error)
}

// State reads groups from informer caches; it never calls the API server.
type State struct {
	VAs          llmdlisters.VariantAutoscalingLister
	Deployments  appslisters.DeploymentLister
	StatefulSets appslisters.StatefulSetLister
	// LeaderWorkerSets is nil when the LWS API is not installed.
	LeaderWorkerSets cache.GenericLister
	// Budget is nil when no budget is configured.
	Budget *budget.Source
}

// Snapshot implements StateSource. VAs whose target cannot be resolved or
// whose cost does not parse are left out (the adapter reports them in the
// VA's conditions); they neither hold a group out of zero nor get woken.
func (s *State) Snapshot(withBudget bool, reserved map[string]bool) (Snapshot, error) {
	vas, err := s.VAs.List(labels.Everything())
	if err != nil {
		return Snapshot{}, fmt.Errorf("list VariantAutoscalings: %w", err)
	}
	var reading budget.Reading
	withBudget = withBudget && s.Budget != nil
	if withBudget {
		if reading, err = s.Budget.Read(); err != nil {
			return Snapshot{}, err
		}
	}
	snap := Snapshot{Groups: map[GroupKey]Group{}}
	var bvs []budget.Variant
	for _, va := range vas {
		t, err := inventory.ResolveTarget(s.targets(), va)
		if err != nil {
			klog.V(5).InfoS("skipping VA", "va", klog.KObj(va), "err", err)
			continue
		}
		cost, err := va.CostValue()
		if err != nil {
			klog.V(5).InfoS("skipping VA", "va", klog.KObj(va), "err", err)
			continue
		}
		v := Variant{Name: va.Name, VA: va, Cost: cost, Replicas: t.Replicas, Need: budget.PerReplica(va), PodLabels: t.TemplateLabels,
			Target: Target{GVK: t.GVK, Namespace: t.Namespace, Name: t.Name, ResourceVersion: t.ResourceVersion}}
		if withBudget {
			w := budget.Workload{VA: va, Replicas: int64(t.Replicas), TemplateNodeSelector: t.Template.NodeSelector, PodSelector: t.PodSelector}
			if reserved[va.Namespace+"/"+va.Name] {
				w.Replicas = max(w.Replicas, 1)
			}
			v.Pool = reading.PoolOf(w)
			bvs = append(bvs, budget.NewVariant(w, v.Pool))
		}
		key := GroupKey{Namespace: va.Namespace, ModelID: va.Spec.ModelID}
		g := snap.Groups[key]
		g.Key = key
		g.Variants = append(g.Variants, v)
		snap.Groups[key] = g
	}
	if withBudget {
		if snap.Usage, err = reading.Usage(bvs); err != nil {
			return Snapshot{}, err
		}
		quotas, err := s.Budget.ReadQuotas()
		if err != nil {
			return Snapshot{}, err
		}
		snap.Budgeted, snap.Quotas = true, budget.EffectiveQuotas(quotas, bvs)
	}
	return snap, nil
}

// targets are the listers of scale targets, for inventory.ResolveTarget (the
// engine's inventory resolves targets with the same function).
func (s *State) targets() inventory.TargetListers {
	return inventory.TargetListers{Deployments: s.Deployments, StatefulSets: s.StatefulSets, LeaderWorkerSets: s.LeaderWorkerSets}
}
