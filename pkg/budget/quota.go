package budget

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Quota is a namespace's ResourceQuota on the GPU resource
// ("requests.<gpu-resource>", the only quota form Kubernetes accepts for
// extended resources).
type Quota struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Hard      int64  `json:"hard"`
	// Used is the quota's status.used, raised to what the namespace's
	// variants hold by spec (see EffectiveQuotas).
	Used int64 `json:"used"`
}

// Room is what the quota has left.
func (q Quota) Room() int64 { return max(0, q.Hard-q.Used) }

func (q Quota) String() string {
	return fmt.Sprintf("ResourceQuota %s/%s (hard %d GPUs, used %d)", q.Namespace, q.Name, q.Hard, q.Used)
}

// QuotaResource is the ResourceQuota key of the GPU resource.
func QuotaResource(gpu corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(string(corev1.DefaultResourceRequestsPrefix) + string(gpu))
}

// QuotasFrom reads the GPU quotas of ResourceQuota objects: those without a
// hard limit on the GPU resource do not limit GPUs and are left out.
func QuotasFrom(list []*corev1.ResourceQuota, gpu corev1.ResourceName) []Quota {
	res := QuotaResource(gpu)
	var out []Quota
	for _, rq := range list {
		hard, ok := rq.Spec.Hard[res]
		if !ok {
			continue
		}
		q := Quota{Namespace: rq.Namespace, Name: rq.Name, Hard: hard.Value()}
		if used, ok := rq.Status.Used[res]; ok {
			q.Used = used.Value()
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// EffectiveQuotas raises each quota's used to the GPUs its namespace's
// variants hold by spec (replicas * gpusPerReplica, at least 1 GPU per
// replica): the quota controller counts pods only once they are created,
// so a target just scaled up would otherwise leave its GPUs free for the
// next scale-up.
func EffectiveQuotas(quotas []Quota, variants []Variant) []Quota {
	held := map[string]int64{}
	for _, v := range variants {
		held[v.Namespace] += v.Replicas * max(1, v.PerReplica.GPUs)
	}
	out := make([]Quota, len(quotas))
	for i, q := range quotas {
		q.Used = max(q.Used, held[q.Namespace])
		out[i] = q
	}
	return out
}

// ReadQuotas lists the GPU quotas (nil when no ResourceQuota lister is set).
func (b *Source) ReadQuotas() ([]Quota, error) {
	if b.ResourceQuotas == nil {
		return nil, nil
	}
	list, err := b.ResourceQuotas.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list resourcequotas: %w", err)
	}
	return QuotasFrom(list, b.GPUResource), nil
}

// QuotaSource gives the namespaces' GPU quotas; *Source implements it. The
// engine asks its LimiterSource for it, so fakes without quotas need not.
type QuotaSource interface {
	ReadQuotas() ([]Quota, error)
}
