package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

var t0 = metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))

func indexer(objs ...any) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			panic(err)
		}
	}
	return idx
}

func hpaOn(name, target string, created metav1.Time, owners ...metav1.OwnerReference) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, CreationTimestamp: created, OwnerReferences: owners},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 4,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target}},
	}
}

func scaledObjectOn(name, target string, created metav1.Time) *unstructured.Unstructured {
	so := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"scaleTargetRef": map[string]any{"name": target}}}}
	so.SetGroupVersionKind(ScaledObjectGVK)
	so.SetNamespace("prod")
	so.SetName(name)
	so.SetCreationTimestamp(created)
	return so
}

// writes lists the verbs other than get/list/watch a fake client saw.
func writes(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}

// Before creating its HPA, the controller asks the API, not the cache: an
// HPA made a moment before the VA (not yet in the cache) is a conflict.
func TestNoSecondHPAWhenTheCacheLags(t *testing.T) {
	va := testVA(1, 4, nil)
	foreign := hpaOn("someone-else", "llama-l4-deploy", t0)
	kube := fake.NewClientset(foreign)
	c := &Controller{Kube: kube, HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(indexer()), Recorder: record.NewFakeRecorder(10)}
	desired, err := DesiredHPA(va, Capabilities{})
	require.NoError(t, err)
	var st status
	require.NoError(t, c.syncHPA(context.Background(), va, desired, &st))
	assert.Empty(t, writes(kube.Actions()), "no HPA created")
	assert.False(t, st.ready)
	assert.Equal(t, llmdv1alpha1.ReasonHPAConflict, st.reason)
	assert.Equal(t, "HPA someone-else already scales Deployment llama-l4-deploy; wva does not create a second HPA", st.msg)
}

// The same for ScaledObjects: a foreign ScaledObject the informer has not
// delivered yet stops wva making its own.
func TestNoSecondScaledObjectWhenTheCacheLags(t *testing.T) {
	va := testVA(1, 4, nil)
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{ScaledObjectGVR: "ScaledObjectList"},
		scaledObjectOn("someone-else", "llama-l4-deploy", t0))
	c := &Controller{Kube: fake.NewClientset(), HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(indexer()),
		Dynamic: dyn, ScaledObjects: cache.NewGenericLister(indexer(), ScaledObjectGVR.GroupResource()), Recorder: record.NewFakeRecorder(10)}
	desired, err := DesiredScaledObject(va, KedaScaler{Address: scalerAddr})
	require.NoError(t, err)
	var st status
	require.NoError(t, c.syncScaledObject(context.Background(), va, desired, &st))
	assert.Empty(t, writes(dyn.Actions()), "no ScaledObject created")
	assert.Equal(t, llmdv1alpha1.ReasonScaledObjectConflict, st.reason)
	assert.Equal(t, "ScaledObject someone-else already scales Deployment llama-l4-deploy; wva does not create a second ScaledObject", st.msg)
}

// Once wva's HPA exists, a competing HPA is still looked for on every
// reconcile: the older of the two stays.
func TestCompetingHPAAfterWvasOwn(t *testing.T) {
	va := testVA(1, 4, nil)
	desired, err := DesiredHPA(va, Capabilities{})
	require.NoError(t, err)
	cases := []struct {
		name        string
		ownCreated  metav1.Time
		foreignName string
		foreign     metav1.Time
		deleted     bool
		msg         string
	}{
		{name: "a foreign HPA made after wva's: reported, wva's kept", ownCreated: t0, foreignName: "late", foreign: metav1.NewTime(t0.Add(time.Minute)),
			msg: "HPA late also scales Deployment llama-l4-deploy, made after wva's HPA llama-l4; two scalers on one target fight, remove HPA late"},
		{name: "a foreign HPA made before wva's (the cache lagged): wva deletes its own", ownCreated: t0, foreignName: "early", foreign: metav1.NewTime(t0.Add(-time.Second)),
			deleted: true, msg: "HPA early already scales Deployment llama-l4-deploy; wva deleted its HPA llama-l4, made after it"},
		{name: "the same second: the smaller name is older", ownCreated: t0, foreignName: "aaa", foreign: t0, deleted: true,
			msg: "HPA aaa already scales Deployment llama-l4-deploy; wva deleted its HPA llama-l4, made after it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			own := desired.DeepCopy()
			own.CreationTimestamp = tc.ownCreated
			own.UID = "own"
			foreign := hpaOn(tc.foreignName, "llama-l4-deploy", tc.foreign)
			kube := fake.NewClientset(own, foreign)
			rec := record.NewFakeRecorder(10)
			c := &Controller{Kube: kube, HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(indexer(own, foreign)), Recorder: rec}
			var st status
			require.NoError(t, c.syncHPA(context.Background(), va, desired, &st))
			assert.Equal(t, llmdv1alpha1.ReasonHPAConflict, st.reason)
			assert.Equal(t, tc.msg, st.msg)
			_, err := kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(context.Background(), "llama-l4", metav1.GetOptions{})
			if tc.deleted {
				assert.Equal(t, []string{"delete horizontalpodautoscalers"}, writes(kube.Actions()))
				assert.Error(t, err, "wva's HPA deleted")
			} else {
				assert.Empty(t, writes(kube.Actions()))
				assert.NoError(t, err, "wva's HPA kept")
			}
			_, foreignErr := kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(context.Background(), tc.foreignName, metav1.GetOptions{})
			assert.NoError(t, foreignErr, "the foreign HPA is never touched")
			assert.NotEmpty(t, rec.Events, "a Warning Event says so")
		})
	}
}

// A foreign scaler's event queues the VA on its target, so the conflict is
// reported at once and not at the VA's next resync.
func TestForeignScalerQueuesTheVAOnItsTarget(t *testing.T) {
	va := testVA(1, 4, nil)
	other := testVA(1, 4, nil)
	other.Name, other.Spec.ScaleTargetRef.Name = "other", "other-deploy"
	c := &Controller{VAs: llmdlisters.NewVariantAutoscalingLister(indexer(va, other))}
	c.NewQueue()
	defer c.queue.ShutDown()
	for _, obj := range []metav1.Object{hpaOn("foreign-hpa", "llama-l4-deploy", t0), scaledObjectOn("foreign-so", "llama-l4-deploy", t0)} {
		c.enqueueFor(obj)
		require.Equal(t, 1, c.queue.Len(), obj.GetName())
		key, _ := c.queue.Get()
		assert.Equal(t, "prod/llama-l4", key)
		c.queue.Done(key)
		c.queue.Forget(key)
	}
}
