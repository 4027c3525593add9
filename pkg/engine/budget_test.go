package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

const accLabel = "nvidia.com/gpu.product"

func indexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, idx.Add(o))
	}
	return idx
}

func vaFor(name string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m",
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: name}}}
}

func gpuNode(name, acc string, gpus int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{accLabel: acc}}}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return n
}

func gpuPod(ns, name, node string, lbls map[string]string, gpus int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// The engine reads the limiter budget of its views from a real budget.Source.
func TestFreeForLimiterOfViews(t *testing.T) {
	h100 := vaFor("h100")
	h100.Spec.AcceleratorName, h100.Spec.GPUsPerReplica = "H100", ptr.To(int32(2))
	l4 := vaFor("l4")
	l4.Spec.AcceleratorName = "L4"
	a100 := vaFor("a100")
	a100.Spec.AcceleratorName = "A100"
	views := []decide.View{
		// spec 2 x 2 GPUs, one pod bound so far: holds 4.
		{VA: h100, Target: decide.Target{Resolved: true, SpecReplicas: 2, PodSelector: labels.SelectorFromSet(labels.Set{"app": "h100"})}},
		// gpusPerReplica unknown: holds what its pods request.
		{VA: l4, Target: decide.Target{Resolved: true, SpecReplicas: 1, PodSelector: labels.SelectorFromSet(labels.Set{"app": "l4"})}},
		{VA: a100, Target: decide.Target{Resolved: true, SpecReplicas: 3}},
	}
	src := &budget.Source{
		Nodes: corelisters.NewNodeLister(indexer(t, gpuNode("h-1", "H100", 4), gpuNode("h-2", "H100", 4), gpuNode("l-1", "L4", 2),
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}})),
		Pods: corelisters.NewPodLister(indexer(t,
			gpuPod("prod", "h100-0", "h-1", map[string]string{"app": "h100"}, 2),
			gpuPod("batch", "training", "h-2", map[string]string{"app": "train"}, 1), // not wva's: still holds its GPU
			gpuPod("prod", "l4-0", "l-1", map[string]string{"app": "l4"}, 1),
		)),
		PoolLabel: accLabel, GPUResource: "nvidia.com/gpu",
	}
	b, err := src.FreeForLimiter(Workloads(views))
	require.NoError(t, err)
	assert.Equal(t, decision.Free{"H100": 8 - 4 - 1, "L4": 2 - 1}, b, "A100 has no nodes, so no pool: not limited")

	// No node carries the label: no pool, no budget at all.
	src.PoolLabel = "example.com/none"
	b, err = src.FreeForLimiter(Workloads(views))
	require.NoError(t, err)
	assert.Nil(t, b)
}

func TestWorkloadsPoolAssignment(t *testing.T) {
	pools := []budget.Pool{{Name: "H100", NodeSelector: labels.Set{accLabel: "H100"}}, {Name: "big", NodeSelector: labels.Set{"pool": "big"}}}
	mk := func(name, acc string, ann map[string]string, nodeSel map[string]string) decide.View {
		va := vaFor(name)
		va.Spec.AcceleratorName, va.Annotations = acc, ann
		return decide.View{VA: va, Target: decide.Target{Resolved: true, NodeSelector: nodeSel}}
	}
	got := budget.Reading{Pools: pools}.LimiterVariants(Workloads([]decide.View{
		mk("annotated", "H100", map[string]string{llmdv1alpha1.AnnotationNodePool: "big"}, nil),
		mk("selector", "H100", nil, map[string]string{"pool": "big"}),
		mk("by-accelerator", "H100", nil, nil),
		mk("nowhere", "L4", nil, nil),
		{VA: vaFor("unresolved")},
	}))
	var pairs [][2]string
	for _, v := range got {
		pairs = append(pairs, [2]string{v.Key, v.Pool})
	}
	assert.Equal(t, [][2]string{{"prod/annotated", "big"}, {"prod/selector", "big"}, {"prod/by-accelerator", "H100"}, {"prod/nowhere", ""}}, pairs)
}
