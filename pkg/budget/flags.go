package budget

import (
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Flags are the GPU budget flags that `wva adapter` and `wva scale-from-zero`
// both take: at most one pool source (a ConfigMap or a node label), the
// resource counted as GPUs, and what an unbudgeted variant's scale-up gets.
// Neither source set = no budget.
type Flags struct {
	ConfigMap   string
	PoolLabel   string
	GPUResource string
	// Unbudgeted is --unbudgeted-variants (see ParseUnbudgeted).
	Unbudgeted string
}

// DefaultFlags returns the defaults.
func DefaultFlags() Flags {
	return Flags{GPUResource: "nvidia.com/gpu", Unbudgeted: string(UnbudgetedUnlimited)}
}

// AddFlags registers --budget-configmap, --budget-node-pool-label,
// --gpu-resource and --unbudgeted-variants.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.ConfigMap, "budget-configmap", f.ConfigMap,
		"ConfigMap in --config-namespace with the GPU budget per node pool (data key = pool name, the acceleratorName for enableLimiter groups; value = {nodeSelector, gpus, gpuMemory}); exclusive with --budget-node-pool-label")
	fs.StringVar(&f.PoolLabel, "budget-node-pool-label", f.PoolLabel,
		"Compute the GPU budget from nodes: one pool per value of this node label (the accelerator label, e.g. nvidia.com/gpu.product, so pools match acceleratorName), a pool holds the allocatable --gpu-resource of its nodes, and the GPUs pods request count against it; exclusive with --budget-configmap")
	fs.StringVar(&f.GPUResource, "gpu-resource", f.GPUResource, "Extended resource counted as GPUs (a namespace's ResourceQuota on requests.<this resource> also limits its scale-ups)")
	fs.StringVar(&f.Unbudgeted, "unbudgeted-variants", f.Unbudgeted,
		"With a GPU budget source: what a scale-up or scale-from-zero wake of a variant no pool fully covers gets (no pool assigned, or a pool limiting GPU memory and no spec.gpuMemoryPerReplica): unlimited admits it, refuse holds it at its current replicas (rule gpu-limited); the adapter sets GPUBudgeted=False on such variants either way")
}

// Policy is the parsed --unbudgeted-variants (unlimited when invalid;
// Validate reports that).
func (f Flags) Policy() Unbudgeted {
	if u, err := ParseUnbudgeted(f.Unbudgeted); err == nil {
		return u
	}
	return UnbudgetedUnlimited
}

// Enabled reports whether a budget source is configured.
func (f Flags) Enabled() bool { return f.ConfigMap != "" || f.PoolLabel != "" }

// Validate names the flag and value of every problem.
func (f Flags) Validate() []error {
	var errs []error
	if f.ConfigMap != "" && f.PoolLabel != "" {
		errs = append(errs, fmt.Errorf("--budget-configmap=%q and --budget-node-pool-label=%q: choose one budget source", f.ConfigMap, f.PoolLabel))
	}
	if f.PoolLabel != "" {
		for _, msg := range validation.IsQualifiedName(f.PoolLabel) {
			errs = append(errs, fmt.Errorf("--budget-node-pool-label=%q: %s", f.PoolLabel, msg))
		}
	}
	if _, err := ParseUnbudgeted(f.Unbudgeted); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// InformerOptions says where NewInformerSource reads pools from; the
// ConfigMap lives in namespace.
func (f Flags) InformerOptions(namespace string) InformerOptions {
	return InformerOptions{PoolLabel: f.PoolLabel, ConfigMapNamespace: namespace, ConfigMapName: f.ConfigMap,
		GPUResource: corev1.ResourceName(f.GPUResource)}
}
