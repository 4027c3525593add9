package inventory

import (
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
	return g.Source.FreeForLimiter(Workloads(views))
}

// Workloads describes the resolved views to the budget (unresolved ones
// hold nothing it can account).
func Workloads(views []engine.View) []budget.Workload {
	out := make([]budget.Workload, 0, len(views))
	for _, v := range views {
		if !v.Target.Resolved {
			continue
		}
		out = append(out, budget.Workload{VA: v.VA, Replicas: int64(v.Target.SpecReplicas),
			TemplateNodeSelector: v.Target.NodeSelector, PodSelector: v.Target.PodSelector})
	}
	return out
}
