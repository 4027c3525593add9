package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// Views lists opted-in HPAs and ScaledObjects as resolved variants beside the VAs, sorted
// with them, with the status Memory keeps for them; a conflicting one is
// left out.
func TestViewsIncludeOptedInObjects(t *testing.T) {
	deploy := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	}
	hpa := func(name, target string) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
				llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: "m"}},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 6,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target}},
		}
	}
	scaledObject := func(name, target string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
			"spec": map[string]any{"scaleTargetRef": map[string]any{"name": target}}}}
		u.SetNamespace("prod")
		u.SetName(name)
		u.SetAnnotations(map[string]string{llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: "m"})
		return u
	}
	mem := &Memory{}
	inv := &Inventory{
		VAs:          llmdlisters.NewVariantAutoscalingLister(indexer(t, vaFor("z-va", "Deployment", "taken"))),
		Deployments:  appslisters.NewDeploymentLister(indexer(t, deploy("free"), deploy("taken"), deploy("so-target"))),
		StatefulSets: appslisters.NewStatefulSetLister(indexer(t)),
		Pods:         corelisters.NewPodLister(indexer(t)),
		HPAs:         autoscalinglisters.NewHorizontalPodAutoscalerLister(indexer(t, hpa("a-hpa", "free"), hpa("b-hpa", "taken"))),
		ScaledObjects: cache.NewGenericLister(indexer(t, scaledObject("c-so", "so-target"), scaledObject("d-so", "taken")),
			llmdv1alpha1.ScaledObjectResource.GroupResource()),
		Memory: mem,
	}
	views, err := inv.Views()
	require.NoError(t, err)
	require.Len(t, views, 3)
	assert.Equal(t, "a-hpa", views[0].VA.Name)
	assert.True(t, IsOptedIn(views[0].VA))
	assert.True(t, views[0].Target.Resolved)
	assert.Equal(t, int32(2), views[0].Target.SpecReplicas)
	assert.Equal(t, int32(6), views[0].VA.Spec.MaxReplicas)
	assert.Equal(t, "c-so", views[1].VA.Name)
	assert.True(t, views[1].Target.Resolved, "kind defaults to Deployment: %+v", views[1].Target)
	assert.Equal(t, int32(0), *views[1].VA.Spec.MinReplicas, "KEDA's default minReplicaCount")
	assert.Equal(t, int32(100), views[1].VA.Spec.MaxReplicas, "KEDA's default maxReplicaCount")
	assert.Equal(t, "z-va", views[2].VA.Name)

	mem.WriteStatus(views[0].VA, llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: 5}})
	views, err = inv.Views()
	require.NoError(t, err)
	assert.Equal(t, int32(5), views[0].VA.Status.DesiredOptimizedAlloc.NumReplicas, "the last decision comes back as the variant's status")
}
