package budget

import (
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// PoolSpec is one entry of the budget ConfigMap: the data key is the pool
// name, the value is YAML or JSON of this shape.
type PoolSpec struct {
	// NodeSelector selects the pool's nodes (required).
	NodeSelector map[string]string `json:"nodeSelector"`
	// GPUs is the pool's GPU budget; omitted = no GPU limit.
	GPUs *int64 `json:"gpus,omitempty"`
	// GPUMemory is the pool's GPU memory budget (a quantity such as
	// "640Gi"); omitted = no memory limit.
	GPUMemory *resource.Quantity `json:"gpuMemory,omitempty"`
}

// ParseConfigMap reads the budget ConfigMap's data. Every problem is
// reported with its pool and field; one bad entry rejects the whole map so
// a half-applied budget never looks valid.
func ParseConfigMap(data map[string]string) ([]Pool, error) {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var pools []Pool
	var errs []error
	for _, name := range keys {
		var spec PoolSpec
		if err := yaml.UnmarshalStrict([]byte(data[name]), &spec); err != nil {
			errs = append(errs, fmt.Errorf("pool %q: %w", name, err))
			continue
		}
		if err := spec.validate(); err != nil {
			errs = append(errs, fmt.Errorf("pool %q: %w", name, err))
			continue
		}
		p := Pool{Name: name, NodeSelector: spec.NodeSelector, Total: Amount{GPUs: Unlimited, GPUMemory: Unlimited}}
		if spec.GPUs != nil {
			p.Total.GPUs = *spec.GPUs
		}
		if spec.GPUMemory != nil {
			p.Total.GPUMemory = spec.GPUMemory.Value()
		}
		pools = append(pools, p)
	}
	return pools, errors.Join(errs...)
}

func (s PoolSpec) validate() error {
	var errs []error
	if len(s.NodeSelector) == 0 {
		errs = append(errs, errors.New("nodeSelector: required (it decides whose GPU requests count against the pool)"))
	}
	for k, v := range s.NodeSelector {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("nodeSelector key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("nodeSelector[%q]=%q: %s", k, v, msg))
		}
	}
	if s.GPUs == nil && s.GPUMemory == nil {
		errs = append(errs, errors.New("want gpus and/or gpuMemory"))
	}
	if s.GPUs != nil && *s.GPUs < 0 {
		errs = append(errs, fmt.Errorf("gpus: %d must be >= 0", *s.GPUs))
	}
	if s.GPUMemory != nil && s.GPUMemory.Sign() < 0 {
		errs = append(errs, fmt.Errorf("gpuMemory: %s must be >= 0", s.GPUMemory.String()))
	}
	return errors.Join(errs...)
}

// PoolsFromNodes makes one pool per value of poolLabel among nodes: GPUs =
// the sum of allocatable GPUs; GPU memory = sum of GPUs * per-GPU memory
// when every GPU node of the pool reports it, else unlimited.
func PoolsFromNodes(nodes []Node, poolLabel string) []Pool {
	byName := map[string]*Pool{}
	memKnown := map[string]bool{}
	for _, n := range nodes {
		name, ok := n.Labels[poolLabel]
		if !ok {
			continue
		}
		p := byName[name]
		if p == nil {
			p = &Pool{Name: name, NodeSelector: map[string]string{poolLabel: name}}
			byName[name] = p
			memKnown[name] = true
		}
		p.Total.GPUs += n.GPUs
		if n.GPUs > 0 {
			if n.GPUMemoryPerGPU <= 0 {
				memKnown[name] = false
			}
			p.Total.GPUMemory += n.GPUs * n.GPUMemoryPerGPU
		}
	}
	pools := make([]Pool, 0, len(byName))
	for name, p := range byName {
		if !memKnown[name] || p.Total.GPUMemory == 0 {
			p.Total.GPUMemory = Unlimited
		}
		pools = append(pools, *p)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	return pools
}
