package inventory

import (
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/engine"
)

// GPUBudget is the engine's budget source for enableLimiter groups: the
// same pools and accounting as the scale-from-zero fast path (nodes'
// allocatable GPUs per pool label value, or the budget ConfigMap, minus what
// bound pods and the variants' spec.replicas hold), read from informers.
//
// The limiter matches a VA's acceleratorName to a pool of the same name, so
// pools must be named after accelerators: --budget-node-pool-label set to
// the accelerator label (e.g. nvidia.com/gpu.product), or ConfigMap keys
// equal to acceleratorName. An accelerator with no such pool is not limited.
type GPUBudget struct {
	Source *budget.Source
}

// Budget implements engine.BudgetSource.
func (g GPUBudget) Budget(views []engine.View) (budget.Free, error) {
	nodes, err := g.Source.ReadNodes()
	if err != nil {
		return nil, err
	}
	pools := g.Source.Pools(nodes)
	if len(pools) == 0 {
		return nil, nil // no pool: no limit, as on the fast path
	}
	pods, err := g.Source.ReadPods()
	if err != nil {
		return nil, err
	}
	return budget.FreeGPUs(budget.Compute(pools, nodes, pods, BudgetVariants(pools, views))), nil
}

// BudgetVariants describes the resolved views to the budget: each holds
// max(its bound pods' GPUs, spec.replicas * gpusPerReplica) in its pool,
// the pool named by its annotation, else implied by its node selector,
// else the pool named after its accelerator.
func BudgetVariants(pools []budget.Pool, views []engine.View) []budget.Variant {
	byName := map[string]bool{}
	for _, p := range pools {
		byName[p.Name] = true
	}
	out := make([]budget.Variant, 0, len(views))
	for _, v := range views {
		if !v.Target.Resolved {
			continue
		}
		va := v.VA
		pool := budget.Assign(pools, va.Annotations[llmdv1alpha1.AnnotationNodePool], v.Target.NodeSelector)
		if pool == "" && byName[va.Spec.AcceleratorName] {
			pool = va.Spec.AcceleratorName
		}
		out = append(out, budget.Variant{Key: va.Namespace + "/" + va.Name, Namespace: va.Namespace, Pool: pool,
			Replicas: int64(v.Target.SpecReplicas), PerReplica: perReplica(va), PodSelector: v.Target.PodSelector})
	}
	return out
}

func perReplica(va *llmdv1alpha1.VariantAutoscaling) budget.Amount {
	var a budget.Amount
	if va.Spec.GPUsPerReplica != nil {
		a.GPUs = int64(*va.Spec.GPUsPerReplica)
	}
	return a
}
