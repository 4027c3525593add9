package scalefromzero

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// cluster is informer caches filled by hand.
type cluster struct {
	vas, deploys, sts, nodes, pods, cms, quotas cache.Indexer
}

func newCluster() *cluster {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	return &cluster{vas: idx(), deploys: idx(), sts: idx(), nodes: idx(), pods: idx(), cms: idx(), quotas: idx()}
}

func (c *cluster) state() *State {
	return &State{
		VAs:          llmdlisters.NewVariantAutoscalingLister(c.vas),
		Deployments:  appslisters.NewDeploymentLister(c.deploys),
		StatefulSets: appslisters.NewStatefulSetLister(c.sts),
	}
}

// withNodeBudget: pools from nodes labelled "pool".
func (c *cluster) withNodeBudget(s *State) *State {
	s.Budget = &budget.Source{Nodes: corelisters.NewNodeLister(c.nodes), Pods: corelisters.NewPodLister(c.pods),
		PoolLabel: "pool", GPUResource: "nvidia.com/gpu", ResourceQuotas: corelisters.NewResourceQuotaLister(c.quotas)}
	return s
}

// withConfigMapBudget: pools from wva-system/gpu-budget.
func (c *cluster) withConfigMapBudget(s *State) *State {
	s.Budget = &budget.Source{Nodes: corelisters.NewNodeLister(c.nodes), Pods: corelisters.NewPodLister(c.pods),
		ConfigMaps: corelisters.NewConfigMapLister(c.cms), ConfigMapNamespace: "wva-system", ConfigMapName: "gpu-budget",
		GPUResource: "nvidia.com/gpu", ResourceQuotas: corelisters.NewResourceQuotaLister(c.quotas)}
	return s
}

// variant adds a Deployment (pods labelled app=<name>, nodeSelector
// pool=<pool> when pool != "") and its VA.
func (c *cluster) variant(ns, name, model, cost string, replicas int32, pool string, gpus int32) *llmdv1alpha1.VariantAutoscaling {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}},
		},
	}
	if pool != "" {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": pool}
	}
	_ = c.deploys.Add(d)
	va := &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: name},
			ModelID:        model, MinReplicas: ptr.To(int32(0)), MaxReplicas: 4, VariantCost: cost,
			GPUsPerReplica: ptr.To(gpus),
		},
	}
	_ = c.vas.Add(va)
	return va
}

func (c *cluster) setReplicas(ns, name string, replicas int32) {
	obj, _, _ := c.deploys.GetByKey(ns + "/" + name)
	d := obj.(*appsv1.Deployment).DeepCopy()
	d.Spec.Replicas = ptr.To(replicas)
	_ = c.deploys.Update(d)
}

func (c *cluster) node(name, pool string, gpus int64) {
	_ = c.nodes.Add(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}},
	})
}

func (c *cluster) pod(ns, name, app, node string, gpus int64) {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	_ = c.pods.Add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "vllm",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": q}, Limits: corev1.ResourceList{"nvidia.com/gpu": q}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	})
}

func (c *cluster) configMap(rv string, data map[string]string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "wva-system", Name: "gpu-budget", ResourceVersion: rv}, Data: data}
	if _, ok, _ := c.cms.Get(cm); ok {
		_ = c.cms.Update(cm)
		return
	}
	_ = c.cms.Add(cm)
}

// quota adds a ResourceQuota on requests.nvidia.com/gpu.
func (c *cluster) quota(ns, name string, hard, used int64) {
	res := corev1.ResourceName("requests.nvidia.com/gpu")
	_ = c.quotas.Add(&corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{res: *resource.NewQuantity(hard, resource.DecimalSI)}},
		Status:     corev1.ResourceQuotaStatus{Used: corev1.ResourceList{res: *resource.NewQuantity(used, resource.DecimalSI)}},
	})
}
