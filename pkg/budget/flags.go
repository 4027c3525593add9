package budget

import (
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Flags are the GPU budget flags that `wva adapter` and `wva scale-from-zero`
// both take: at most one pool source (a ConfigMap or a node label) and the
// resource counted as GPUs. Neither source set = no budget.
type Flags struct {
	ConfigMap   string
	PoolLabel   string
	GPUResource string
}

// DefaultFlags returns the defaults.
func DefaultFlags() Flags { return Flags{GPUResource: "nvidia.com/gpu"} }

// AddFlags registers --budget-configmap, --budget-node-pool-label and
// --gpu-resource.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.ConfigMap, "budget-configmap", f.ConfigMap,
		"ConfigMap in --config-namespace with the GPU budget per node pool (data key = pool name, the acceleratorName for enableLimiter groups; value = {nodeSelector, gpus, gpuMemory}); exclusive with --budget-node-pool-label")
	fs.StringVar(&f.PoolLabel, "budget-node-pool-label", f.PoolLabel,
		"Compute the GPU budget from nodes: one pool per value of this node label (the accelerator label, e.g. nvidia.com/gpu.product, so pools match acceleratorName), a pool holds the allocatable --gpu-resource of its nodes, and the GPUs pods request count against it; exclusive with --budget-configmap")
	fs.StringVar(&f.GPUResource, "gpu-resource", f.GPUResource, "Extended resource counted as GPUs")
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
	return errs
}

// InformerOptions says where NewInformerSource reads pools from; the
// ConfigMap lives in namespace.
func (f Flags) InformerOptions(namespace string) InformerOptions {
	return InformerOptions{PoolLabel: f.PoolLabel, ConfigMapNamespace: namespace, ConfigMapName: f.ConfigMap,
		GPUResource: corev1.ResourceName(f.GPUResource)}
}
