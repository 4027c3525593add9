package budget

import (
	"k8s.io/apimachinery/pkg/labels"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
)

// Workload is a VA with its resolved scale target, as the limiter and the
// scale-from-zero fast path both know it.
type Workload struct {
	VA *llmdv1alpha1.VariantAutoscaling
	// Replicas the target holds (spec.replicas, or more when reserved).
	Replicas int64
	// TemplateNodeSelector is the pod template's nodeSelector.
	TemplateNodeSelector map[string]string
	// PodSelector selects the target's pods (nil: none).
	PodSelector labels.Selector
}

// Reading is one read of the nodes and the pools; Usage and Free complete
// it with the bound pods. Both budget users go through it, so they see the
// same pools and the same accounting.
type Reading struct {
	src   *Source
	Pools []Pool
	nodes []Node
}

// Read lists the nodes and the current pools.
func (s *Source) Read() (Reading, error) {
	nodes, err := s.ReadNodes()
	if err != nil {
		return Reading{}, err
	}
	return Reading{src: s, Pools: s.Pools(nodes), nodes: nodes}, nil
}

// PoolOf is the pool w belongs to: the one its node-pool annotation names,
// else the one its node selector implies (see Assign), else "".
func (r Reading) PoolOf(w Workload) string {
	return Assign(r.Pools, w.VA.Annotations[llmdv1alpha1.AnnotationNodePool], w.TemplateNodeSelector)
}

// NewVariant describes w in pool: it holds w.Replicas * PerReplica(w.VA).
func NewVariant(w Workload, pool string) Variant {
	va := w.VA
	return Variant{Key: va.Namespace + "/" + va.Name, Namespace: va.Namespace, Pool: pool,
		Replicas: w.Replicas, PerReplica: PerReplica(va), PodSelector: w.PodSelector}
}

// PerReplica is what one replica of va holds: gpusPerReplica and
// gpuMemoryPerReplica (0 when unset).
func PerReplica(va *llmdv1alpha1.VariantAutoscaling) Amount {
	var a Amount
	if va.Spec.GPUsPerReplica != nil {
		a.GPUs = int64(*va.Spec.GPUsPerReplica)
	}
	if va.Spec.GPUMemoryPerReplica != nil {
		a.GPUMemory = va.Spec.GPUMemoryPerReplica.Value()
	}
	return a
}

// Usage reads the bound pods and returns every pool's usage. No pool
// defined (e.g. the ConfigMap is absent) is no budget at all: nil, even for
// a variant whose annotation names a pool.
func (r Reading) Usage(variants []Variant) (map[string]Usage, error) {
	if len(r.Pools) == 0 {
		return nil, nil
	}
	pods, err := r.src.ReadPods()
	if err != nil {
		return nil, err
	}
	return Compute(r.Pools, r.nodes, pods, variants), nil
}

// LimiterVariants describes the limiter's workloads: each is in the pool
// PoolOf gives, else in the pool named after its acceleratorName (the
// limiter matches accelerators to pools by name), else in none.
func (r Reading) LimiterVariants(ws []Workload) []Variant {
	byName := map[string]bool{}
	for _, p := range r.Pools {
		byName[p.Name] = true
	}
	out := make([]Variant, 0, len(ws))
	for _, w := range ws {
		pool := r.PoolOf(w)
		if pool == "" && byName[w.VA.Spec.AcceleratorName] {
			pool = w.VA.Spec.AcceleratorName
		}
		out = append(out, NewVariant(w, pool))
	}
	return out
}

// LimiterSource gives the engine's budget for the workloads: the same pools
// and accounting as the scale-from-zero fast path. *Source is the one
// implementation; the engine depends on this interface.
type LimiterSource interface {
	// LimiterUsage describes the workloads (in order) with their pools and
	// returns every pool's usage; usage is nil when no pool is defined.
	LimiterUsage(ws []Workload) ([]Variant, map[string]Usage, error)
}

// LimiterUsage reads the pools and the bound pods once for the workloads.
func (s *Source) LimiterUsage(ws []Workload) ([]Variant, map[string]Usage, error) {
	r, err := s.Read()
	if err != nil {
		return nil, nil, err
	}
	vs := r.LimiterVariants(ws)
	usage, err := r.Usage(vs)
	return vs, usage, err
}

// FreeForLimiter is the limiter's budget: per accelerator-named pool with
// a GPU limit, the GPUs the workloads and other bound pods leave free; nil
// when no pool is defined (not limited).
func (s *Source) FreeForLimiter(ws []Workload) (decision.Free, error) {
	_, usage, err := s.LimiterUsage(ws)
	if usage == nil || err != nil {
		return nil, err
	}
	return FreeGPUs(usage), nil
}
