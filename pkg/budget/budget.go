// Package budget owns the GPU budget: it accounts GPUs and GPU memory per
// node pool (which pools exist, what the pods and variants on them hold,
// whether one more replica fits and, when it does not, who holds the
// budget) for the scale-from-zero fast path, and turns the same accounting
// into the limiter's free GPUs per accelerator (decision.Free) and the
// engine's admission of every scale-up (Ledger, admit.go). The accounting is
// pure; Source (source.go, read.go) gathers nodes, pods and pools from
// informer caches.
package budget

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wva-project/wva/pkg/decision"
)

// Unlimited marks a pool dimension without a limit.
const Unlimited int64 = -1

// Amount is a quantity of GPUs and GPU memory (bytes).
type Amount struct {
	GPUs      int64 `json:"gpus"`
	GPUMemory int64 `json:"gpuMemoryBytes"`
}

// Add returns a + b.
func (a Amount) Add(b Amount) Amount {
	return Amount{GPUs: a.GPUs + b.GPUs, GPUMemory: a.GPUMemory + b.GPUMemory}
}

// Times returns a scaled by n replicas.
func (a Amount) Times(n int64) Amount {
	return Amount{GPUs: a.GPUs * n, GPUMemory: a.GPUMemory * n}
}

// IsZero reports whether a holds nothing.
func (a Amount) IsZero() bool { return a.GPUs == 0 && a.GPUMemory == 0 }

// String renders "6 GPUs" or "6 GPUs, 80Gi GPU memory"; Unlimited reads
// "unlimited".
func (a Amount) String() string {
	gpus := "unlimited GPUs"
	if a.GPUs != Unlimited {
		gpus = fmt.Sprintf("%d GPUs", a.GPUs)
	}
	switch a.GPUMemory {
	case 0:
		return gpus
	case Unlimited:
		return gpus + ", unlimited GPU memory"
	}
	return gpus + ", " + resource.NewQuantity(a.GPUMemory, resource.BinarySI).String() + " GPU memory"
}

// Pool is a set of nodes sharing one budget. A dimension set to Unlimited
// is not checked.
type Pool struct {
	Name string
	// NodeSelector selects the pool's nodes; it also decides which variants
	// belong to the pool (see Assign).
	NodeSelector labels.Set
	Total        Amount
}

// Node is what the budget needs of a Node.
type Node struct {
	Name   string
	Labels map[string]string
	// GPUs is the node's allocatable GPU count.
	GPUs int64
	// GPUMemoryPerGPU is bytes of memory per GPU, 0 when unknown.
	GPUMemoryPerGPU int64
}

// Pod is what the budget needs of a non-terminal pod bound to a node.
type Pod struct {
	Namespace, Name string
	NodeName        string
	Labels          map[string]string
	// GPUs requested by the pod (sum over its containers, or the largest
	// init container when that is more).
	GPUs int64
}

// Variant is one VariantAutoscaling as the budget sees it.
type Variant struct {
	// Key is "namespace/name" of the VA.
	Key       string
	Namespace string
	// Pool is the pool the variant is assigned to ("" = none).
	Pool string
	// Replicas is the target's spec.replicas (what it will hold once
	// scheduled, even before its pods exist).
	Replicas int64
	// PerReplica is gpusPerReplica / gpuMemoryPerReplica.
	PerReplica Amount
	// PodSelector selects the variant's pods in Namespace (nil: none).
	PodSelector labels.Selector
}

// Holder is a variant (or a pod wva does not manage) holding part of a
// pool's budget.
type Holder struct {
	// Name is "namespace/name" of the VA, or "pod namespace/name".
	Name string `json:"name"`
	// Namespace and Model (the variant's modelID, "" for a pod) are filled
	// in by Ledger.Annotate for refusals.
	Namespace string `json:"namespace,omitempty"`
	Model     string `json:"modelID,omitempty"`
	Amount
}

// Usage is a pool's budget and what holds it.
type Usage struct {
	Pool      string
	Total     Amount
	Allocated Amount
	// Holders, largest GPU holders first.
	Holders []Holder
}

// Available is what is left; Unlimited where the pool has no limit.
func (u Usage) Available() Amount {
	avail := func(total, used int64) int64 {
		if total == Unlimited {
			return Unlimited
		}
		return max(0, total-used)
	}
	return Amount{GPUs: avail(u.Total.GPUs, u.Allocated.GPUs), GPUMemory: avail(u.Total.GPUMemory, u.Allocated.GPUMemory)}
}

// Assign returns the pool a variant belongs to: the pool named by its
// annotation when set (returned even when no such pool exists, so that a
// typo blocks instead of silently lifting the limit), else the first pool (by name) whose node selector the variant's
// pod-template nodeSelector implies, else "".
func Assign(pools []Pool, annotation string, templateNodeSelector map[string]string) string {
	if annotation != "" {
		return annotation
	}
	names := make([]string, 0, len(pools))
	byName := map[string]Pool{}
	for _, p := range pools {
		names = append(names, p.Name)
		byName[p.Name] = p
	}
	sort.Strings(names)
	for _, n := range names {
		sel := byName[n].NodeSelector
		if len(sel) == 0 {
			continue // an empty selector would claim every variant
		}
		if labels.SelectorFromSet(sel).Matches(labels.Set(templateNodeSelector)) {
			return n
		}
	}
	return ""
}

// Compute returns every pool's usage. A variant holds max(its pods' GPU
// requests on the pool's nodes, replicas * gpusPerReplica) GPUs and
// replicas * gpuMemoryPerReplica memory in each pool it is assigned to or
// has pods in: the first term sees what is really bound, the second what a
// just-scaled target will take before its pods are scheduled. Bound GPU pods
// that belong to no variant hold their requests as "pod namespace/name".
func Compute(pools []Pool, nodes []Node, pods []Pod, variants []Variant) map[string]Usage {
	out := make(map[string]Usage, len(pools))
	byNamespace := map[string][]Variant{}
	for _, v := range variants {
		byNamespace[v.Namespace] = append(byNamespace[v.Namespace], v)
	}
	for _, pool := range pools {
		sel := labels.SelectorFromSet(pool.NodeSelector)
		inPool := map[string]bool{}
		for _, n := range nodes {
			if len(pool.NodeSelector) > 0 && sel.Matches(labels.Set(n.Labels)) {
				inPool[n.Name] = true
			}
		}
		podGPUs := map[string]int64{} // variant key -> GPUs of its pods here
		held := map[string]Amount{}
		for _, p := range pods {
			if p.GPUs <= 0 || !inPool[p.NodeName] {
				continue
			}
			if v := owner(byNamespace[p.Namespace], p); v != "" {
				podGPUs[v] += p.GPUs
				continue
			}
			held["pod "+p.Namespace+"/"+p.Name] = Amount{GPUs: p.GPUs}
		}
		for _, v := range variants {
			gpus, seen := podGPUs[v.Key]
			if v.Pool != pool.Name && !seen {
				continue
			}
			spec := v.PerReplica.Times(v.Replicas)
			held[v.Key] = Amount{GPUs: max(gpus, spec.GPUs), GPUMemory: spec.GPUMemory}
		}
		u := Usage{Pool: pool.Name, Total: pool.Total}
		for name, a := range held {
			if a.IsZero() {
				continue
			}
			u.Allocated = u.Allocated.Add(a)
			u.Holders = append(u.Holders, Holder{Name: name, Amount: a})
		}
		SortHolders(u.Holders)
		out[pool.Name] = u
	}
	return out
}

// SortHolders orders holders by GPUs, then memory (largest first), then name.
func SortHolders(h []Holder) {
	sort.Slice(h, func(i, j int) bool {
		if h[i].GPUs != h[j].GPUs {
			return h[i].GPUs > h[j].GPUs
		}
		if h[i].GPUMemory != h[j].GPUMemory {
			return h[i].GPUMemory > h[j].GPUMemory
		}
		return h[i].Name < h[j].Name
	})
}

// owner is the key of the variant (of p's namespace) whose pod selector
// matches p, "" if none.
func owner(variants []Variant, p Pod) string {
	for _, v := range variants {
		if v.PodSelector != nil && !v.PodSelector.Empty() && v.PodSelector.Matches(labels.Set(p.Labels)) {
			return v.Key
		}
	}
	return ""
}

// FreeGPUs is the GPUs left in each pool with a GPU limit, keyed by pool
// name (pools without one are absent: not limited).
func FreeGPUs(usage map[string]Usage) decision.Free {
	out := decision.Free{}
	for name, u := range usage {
		if u.Total.GPUs != Unlimited {
			out[name] = u.Available().GPUs
		}
	}
	return out
}
