package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/daemon"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
	"github.com/wva-project/wva/pkg/inventory"
	"github.com/wva-project/wva/test/testenv"
)

// TestScaleTargetResolve resolves a Deployment, a StatefulSet and a
// LeaderWorkerSet (from a minimal CRD) created in a real API server,
// through informers built as the adapter builds them (the inventory's
// transforms on the typed caches, a dynamic informer for LWS once the API
// is served), as the engine and the scale-from-zero fast path both do.
func TestScaleTargetResolve(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "prod"
	cluster, kube, wva := startCluster(ctx, t, ns)
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, filepath.Join(repoRoot(), "test", "integration", "testdata", "leaderworkerset-crd.yaml"))
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)

	template := func(app, pool string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": pool},
				Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai", Args: []string{"--max-num-seqs=32"}}}}}
	}
	d, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l4"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "l4"}},
			Template: template("l4", "l4")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}
	_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)

	// No replicas: the API server defaults them to 1.
	s, err := kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h100"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "h100"}},
			Template: template("h100", "h100")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	s.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	_, err = kube.AppsV1().StatefulSets(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)

	lwsClient := dyn.Resource(llmdv1alpha1.LeaderWorkerSetResource).Namespace(ns)
	podTemplate := func(pool string) map[string]any {
		return map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"pool": pool},
			"containers": []any{map[string]any{"name": "vllm", "image": "vllm/vllm-openai", "args": []any{"--max-num-seqs=8"}}}}}
	}
	lws, err := lwsClient.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": llmdv1alpha1.LeaderWorkerSetAPIVersion, "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": ns, "name": "big"},
		"spec": map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{"size": int64(4),
			"leaderTemplate": podTemplate("gb200-leader"), "workerTemplate": podTemplate("gb200")}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	lws.Object["status"] = map[string]any{"replicas": int64(2), "readyReplicas": int64(1),
		"hpaPodSelector": fmt.Sprintf("%s=big,%s=0", llmdv1alpha1.LabelLWSName, llmdv1alpha1.LabelLWSWorkerIndex)}
	_, err = lwsClient.UpdateStatus(ctx, lws, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The fixture serves /scale as the LWS project does; the fast path
	// scales through it.
	scale, err := lwsClient.Get(ctx, "big", metav1.GetOptions{}, "scale")
	require.NoError(t, err)
	specReplicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	require.Equal(t, int64(2), specReplicas)

	for name, ref := range map[string]llmdv1alpha1.CrossVersionObjectReference{
		"deployment":  {APIVersion: "apps/v1", Kind: "Deployment", Name: "l4"},
		"statefulset": {APIVersion: "apps/v1", Kind: "StatefulSet", Name: "h100"},
		"lws":         {APIVersion: llmdv1alpha1.LeaderWorkerSetAPIVersion, Kind: "LeaderWorkerSet", Name: "big"},
		"missing":     {APIVersion: "apps/v1", Kind: "Deployment", Name: "gone"},
	} {
		va := newVA(ns, name, "m", "10", 0, 4)
		va.Spec.ScaleTargetRef = ref
		_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The informers, as pkg/adapter builds them.
	kubeInf := informers.NewSharedInformerFactory(kube, 0)
	wvaInf := wvainformers.NewSharedInformerFactory(wva, 0)
	require.NoError(t, kubeInf.Core().V1().Pods().Informer().SetTransform(inventory.PodTransform))
	require.NoError(t, kubeInf.Apps().V1().Deployments().Informer().SetTransform(inventory.DeploymentTransform))
	require.NoError(t, kubeInf.Apps().V1().StatefulSets().Informer().SetTransform(inventory.StatefulSetTransform))
	inv := &inventory.Inventory{
		VAs:          wvaInf.Llmd().V1alpha1().VariantAutoscalings().Lister(),
		Deployments:  kubeInf.Apps().V1().Deployments().Lister(),
		StatefulSets: kubeInf.Apps().V1().StatefulSets().Lister(),
		Pods:         kubeInf.Core().V1().Pods().Lister(),
	}
	require.True(t, daemon.APIServed(kube, llmdv1alpha1.LeaderWorkerSetResource), "the LWS CRD is established")
	dynInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", nil)
	inv.LeaderWorkerSets = dynInf.ForResource(llmdv1alpha1.LeaderWorkerSetResource).Lister()
	stop := make(chan struct{})
	defer close(stop)
	kubeInf.Start(stop)
	wvaInf.Start(stop)
	dynInf.Start(stop)
	kubeInf.WaitForCacheSync(stop)
	wvaInf.WaitForCacheSync(stop)
	dynInf.WaitForCacheSync(stop)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), dynInf.ForResource(llmdv1alpha1.LeaderWorkerSetResource).Informer().HasSynced))

	type want struct {
		replicas, ready, perReplica int32
		pool                        string
		serves, notServes, holds    labels.Set
	}
	lwsPod := func(index string) labels.Set {
		return labels.Set{llmdv1alpha1.LabelLWSName: "big", llmdv1alpha1.LabelLWSWorkerIndex: index}
	}
	for _, tc := range []struct {
		va   string
		want want
	}{
		{"deployment", want{replicas: 3, ready: 2, perReplica: 1, pool: "l4",
			serves: labels.Set{"app": "l4"}, notServes: labels.Set{"app": "h100"}, holds: labels.Set{"app": "l4"}}},
		{"statefulset", want{replicas: 1, ready: 1, perReplica: 1, pool: "h100",
			serves: labels.Set{"app": "h100"}, notServes: labels.Set{"app": "l4"}, holds: labels.Set{"app": "h100"}}},
		{"lws", want{replicas: 2, ready: 1, perReplica: 4, pool: "gb200-leader",
			serves: lwsPod("0"), notServes: lwsPod("3"), holds: lwsPod("3")}},
	} {
		t.Run(tc.va, func(t *testing.T) {
			var got inventory.ScaleTarget
			// The status updates may reach the caches after the sync.
			testenv.Eventually(ctx, t, tc.va+" resolved", func() (bool, string) {
				va, err := inv.VAs.VariantAutoscalings(ns).Get(tc.va)
				if err != nil {
					return false, err.Error()
				}
				if got, err = inventory.ResolveTarget(inv.Targets(), va); err != nil {
					return false, err.Error()
				}
				return got.ReadyReplicas == tc.want.ready, fmt.Sprintf("ready replicas %d", got.ReadyReplicas)
			})
			assert.Equal(t, [3]int32{tc.want.replicas, tc.want.ready, tc.want.perReplica},
				[3]int32{got.Replicas, got.ReadyReplicas, got.PodsPerReplica}, "replicas, ready replicas, pods per replica")
			assert.NotEmpty(t, got.ResourceVersion)
			assert.Equal(t, tc.want.pool, got.Template.NodeSelector["pool"])
			assert.True(t, got.ServingSelector.Matches(tc.want.serves), "serving pod %v", tc.want.serves)
			assert.False(t, got.ServingSelector.Matches(tc.want.notServes), "not serving %v", tc.want.notServes)
			assert.True(t, got.PodSelector.Matches(tc.want.holds), "pod of the target %v", tc.want.holds)
		})
	}

	t.Run("missing", func(t *testing.T) {
		va, err := inv.VAs.VariantAutoscalings(ns).Get("missing")
		require.NoError(t, err)
		_, err = inventory.ResolveTarget(inv.Targets(), va)
		var u *inventory.Unresolved
		require.True(t, errors.As(err, &u), "%v", err)
		assert.Equal(t, llmdv1alpha1.ReasonTargetNotFound, u.Reason)
		assert.Equal(t, "Deployment prod/gone not found", u.Message)
		assert.Equal(t, llmdv1alpha1.ReasonTargetNotFound, inv.Resolve(va).Reason, "the engine sees the same reason")
	})
}
