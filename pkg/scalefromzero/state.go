package scalefromzero

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/scaletarget"
)

// Snapshot is the groups and, when asked for, the budget, as of one read of
// the informer caches.
type Snapshot struct {
	Groups map[GroupKey]Group
	// Usage per pool; nil when no budget is configured or none was asked.
	Usage map[string]budget.Usage
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
	Budget *BudgetSource
}

// Snapshot implements StateSource. VAs whose target cannot be resolved or
// whose cost does not parse are left out (the adapter reports them in the
// VA's conditions); they neither hold a group out of zero nor get woken.
func (s *State) Snapshot(withBudget bool, reserved map[string]bool) (Snapshot, error) {
	vas, err := s.VAs.List(labels.Everything())
	if err != nil {
		return Snapshot{}, fmt.Errorf("list VariantAutoscalings: %w", err)
	}
	var pools []budget.Pool
	var nodes []budget.Node
	withBudget = withBudget && s.Budget != nil
	if withBudget {
		nodes, err = s.Budget.ReadNodes()
		if err != nil {
			return Snapshot{}, err
		}
		pools = s.Budget.Pools(nodes)
	}
	snap := Snapshot{Groups: map[GroupKey]Group{}}
	var bvs []budget.Variant
	for _, va := range vas {
		t, err := scaletarget.Resolve(s.targets(), va)
		if err != nil {
			klog.V(5).InfoS("skipping VA", "va", klog.KObj(va), "err", err)
			continue
		}
		cost, err := va.CostValue()
		if err != nil {
			klog.V(5).InfoS("skipping VA", "va", klog.KObj(va), "err", err)
			continue
		}
		v := Variant{Name: va.Name, VA: va, Cost: cost, Replicas: t.Replicas, Need: need(va),
			Target: Target{GVK: t.GVK, Namespace: t.Namespace, Name: t.Name, ResourceVersion: t.ResourceVersion}}
		if withBudget {
			v.Pool = budget.Assign(pools, va.Annotations[llmdv1alpha1.AnnotationNodePool], t.Template.NodeSelector)
			replicas := int64(t.Replicas)
			if reserved[va.Namespace+"/"+va.Name] {
				replicas = max(replicas, 1)
			}
			bvs = append(bvs, budget.Variant{Key: va.Namespace + "/" + va.Name, Namespace: va.Namespace, Pool: v.Pool,
				Replicas: replicas, PerReplica: v.Need, PodSelector: t.PodSelector})
		}
		key := GroupKey{Namespace: va.Namespace, ModelID: va.Spec.ModelID}
		g := snap.Groups[key]
		g.Key = key
		g.Variants = append(g.Variants, v)
		snap.Groups[key] = g
	}
	// No pool defined (e.g. the ConfigMap is absent) is no budget at all,
	// even for a variant whose annotation names a pool.
	if withBudget && len(pools) > 0 {
		pods, err := s.Budget.ReadPods()
		if err != nil {
			return Snapshot{}, err
		}
		snap.Usage = budget.Compute(pools, nodes, pods, bvs)
	}
	return snap, nil
}

func need(va *llmdv1alpha1.VariantAutoscaling) budget.Amount {
	var a budget.Amount
	if va.Spec.GPUsPerReplica != nil {
		a.GPUs = int64(*va.Spec.GPUsPerReplica)
	}
	if va.Spec.GPUMemoryPerReplica != nil {
		a.GPUMemory = va.Spec.GPUMemoryPerReplica.Value()
	}
	return a
}

// targets are the listers of scale targets, for scaletarget.Resolve (the
// engine's inventory resolves targets with the same function).
func (s *State) targets() scaletarget.Listers {
	return scaletarget.Listers{Deployments: s.Deployments, StatefulSets: s.StatefulSets, LeaderWorkerSets: s.LeaderWorkerSets}
}

// BudgetSource reads pools and GPU usage from informer caches; the adapter's
// limiter uses the same code.
type BudgetSource = budget.Source
