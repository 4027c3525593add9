package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// A user-owned HPA opted in by upstream v0.9's annotations is never
// created over, adopted or rewritten by the controller (only an explicit
// wva.llmd.ai/adopt-hpa on the VA would); the VA is reported HPAConflict.
func TestUserOptedInHPAIsLeftAlone(t *testing.T) {
	optedIn := func(name string) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Annotations: map[string]string{
				llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: "m"}},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](3), MaxReplicas: 9,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4-deploy"}},
		}
	}
	for _, name := range []string{"llama-l4", "upstream-hpa"} { // the VA's name, another name
		t.Run(name, func(t *testing.T) {
			h := optedIn(name)
			kube := fake.NewClientset(h)
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			require.NoError(t, idx.Add(h))
			c := &Controller{Kube: kube, HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(idx), Recorder: record.NewFakeRecorder(10)}
			va := testVA(1, 4, nil)
			desired, err := DesiredHPA(va, Capabilities{})
			require.NoError(t, err)
			var st status
			require.NoError(t, c.syncHPA(context.Background(), va, desired, &st))
			assert.False(t, st.ready)
			assert.Equal(t, llmdv1alpha1.ReasonHPAConflict, st.reason)
			for _, a := range kube.Actions() {
				assert.Contains(t, []string{"get", "list", "watch"}, a.GetVerb(), "controller wrote: %v", a)
			}
			live, err := kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, h.Spec, live.Spec)
		})
	}
}
