package budget

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Source reads pools and GPU usage from informer caches: pools from
// a ConfigMap when ConfigMaps is set, else from nodes labelled PoolLabel.
type Source struct {
	Nodes corelisters.NodeLister
	// Pods lists non-terminal pods bound to a node (see PodTransform).
	Pods corelisters.PodLister

	ConfigMaps                        corelisters.ConfigMapLister
	ConfigMapNamespace, ConfigMapName string

	PoolLabel   string
	GPUResource corev1.ResourceName

	// ResourceQuotas are the namespaces' quotas (nil: quotas not read).
	ResourceQuotas corelisters.ResourceQuotaLister

	mu        sync.Mutex
	lastRV    string
	lastPools []Pool
}

// ReadNodes lists the nodes with their allocatable GPUs.
func (b *Source) ReadNodes() ([]Node, error) {
	list, err := b.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]Node, 0, len(list))
	for _, n := range list {
		bn := Node{Name: n.Name, Labels: n.Labels}
		if q, ok := n.Status.Allocatable[b.GPUResource]; ok {
			bn.GPUs = q.Value()
		}
		if mib, ok := n.Labels[llmdv1alpha1.LabelGPUMemory]; ok {
			var v int64
			if _, err := fmt.Sscanf(mib, "%d", &v); err == nil && v > 0 {
				bn.GPUMemoryPerGPU = v << 20
			}
		}
		out = append(out, bn)
	}
	return out, nil
}

// Pools returns the current pools. An invalid ConfigMap keeps the last
// valid pools in force (none before the first valid one: no limit), the
// same rule the adapter applies to its ConfigMaps.
func (b *Source) Pools(nodes []Node) []Pool {
	if b.ConfigMaps == nil {
		return PoolsFromNodes(nodes, b.PoolLabel)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cm, err := b.ConfigMaps.ConfigMaps(b.ConfigMapNamespace).Get(b.ConfigMapName)
	if err != nil {
		if b.lastRV != "absent" {
			klog.InfoS("budget ConfigMap not found: no GPU budget applies", "configmap", b.ConfigMapNamespace+"/"+b.ConfigMapName, "err", err)
		}
		b.lastRV, b.lastPools = "absent", nil
		return nil
	}
	if cm.ResourceVersion == b.lastRV {
		return b.lastPools
	}
	b.lastRV = cm.ResourceVersion
	pools, err := ParseConfigMap(cm.Data)
	if err != nil {
		klog.ErrorS(err, "rejected budget ConfigMap; the last valid budget stays in force", "configmap", klog.KObj(cm))
		return b.lastPools
	}
	klog.InfoS("applied budget ConfigMap", "configmap", klog.KObj(cm), "pools", len(pools))
	b.lastPools = pools
	return pools
}

// ReadPods lists bound, non-terminal pods that request GPUs.
func (b *Source) ReadPods() ([]Pod, error) {
	list, err := b.Pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := make([]Pod, 0, len(list))
	for _, p := range list {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if g := PodGPUs(p, b.GPUResource); g > 0 {
			out = append(out, Pod{Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Labels: p.Labels, GPUs: g})
		}
	}
	return out, nil
}

// PodGPUs is what the scheduler reserves for the pod: the larger of the
// sum over containers and the largest init container (requests, else
// limits, which extended resources must equal).
func PodGPUs(p *corev1.Pod, res corev1.ResourceName) int64 {
	get := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Requests[res]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Limits[res]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		sum += get(c)
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, get(c))
	}
	return max(sum, initMax)
}

// PodTransform trims pods in the budget informer's cache to what the
// budget reads: every bound pod of the cluster is cached, so this keeps
// memory near a few hundred bytes per pod.
func PodTransform(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trim := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, 0, len(cs))
		for _, c := range cs {
			out = append(out, corev1.Container{Name: c.Name, Resources: c.Resources})
		}
		return out
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: trim(p.Spec.Containers), InitContainers: trim(p.Spec.InitContainers)},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// InformerOptions says where a Source reads its pools from: a ConfigMap
// when ConfigMapName is set, else nodes labelled PoolLabel.
type InformerOptions struct {
	PoolLabel                         string
	ConfigMapNamespace, ConfigMapName string
	GPUResource                       corev1.ResourceName
}

// NewInformerSource builds a Source on its own informers: every bound,
// non-terminal pod of the cluster (trimmed by PodTransform), nodes,
// ResourceQuotas (for the namespaces' GPU quotas), and the
// ConfigMap when configured. Start the returned starters, then wait for
// synced, before the first read.
func NewInformerSource(kube kubernetes.Interface, o InformerOptions) (*Source, []func(<-chan struct{}), []cache.InformerSynced, error) {
	podInf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
	}))
	pods := podInf.Core().V1().Pods()
	if err := pods.Informer().SetTransform(PodTransform); err != nil {
		return nil, nil, nil, err
	}
	nodeInf := informers.NewSharedInformerFactory(kube, 0)
	nodes := nodeInf.Core().V1().Nodes()
	quotas := nodeInf.Core().V1().ResourceQuotas()
	b := &Source{Nodes: nodes.Lister(), Pods: pods.Lister(), PoolLabel: o.PoolLabel, GPUResource: o.GPUResource,
		ResourceQuotas: quotas.Lister()}
	starts := []func(<-chan struct{}){podInf.Start, nodeInf.Start}
	synced := []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced, quotas.Informer().HasSynced}
	if o.ConfigMapName != "" {
		cmInf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(o.ConfigMapNamespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.ConfigMapName).String()
			}))
		cms := cmInf.Core().V1().ConfigMaps()
		b.ConfigMaps, b.ConfigMapNamespace, b.ConfigMapName = cms.Lister(), o.ConfigMapNamespace, o.ConfigMapName
		starts = append(starts, cmInf.Start)
		synced = append(synced, cms.Informer().HasSynced)
	}
	return b, starts, synced, nil
}
