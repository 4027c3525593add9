package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func targetVA(kind, target string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "va"},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m",
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: kind, Name: target}},
	}
}

func lws(name string, spec map[string]any, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": "prod", "name": name, "resourceVersion": "42"},
		"spec":     spec,
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func lwsPodSpec(pool string, args ...any) map[string]any {
	return map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"pool": pool},
		"containers": []any{map[string]any{"name": "vllm", "args": args}}}}
}

// pod labels of an LWS's pods, as the LWS controller writes them.
func lwsPod(name, index string) labels.Set {
	return labels.Set{llmdv1alpha1.LabelLWSName: name, llmdv1alpha1.LabelLWSWorkerIndex: index}
}

func TestResolveTarget(t *testing.T) {
	l4 := map[string]string{"app": "l4"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "l4", ResourceVersion: "7"},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: l4}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 3}}
	deploy.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "l4"}
	noSelector := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bare"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}}}
	badSelector := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bad"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "h100"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "h100"}}}}
	lwsIdx := indexer(t,
		lws("big", map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{"size": int64(4),
			"leaderTemplate": lwsPodSpec("leader", "--max-num-seqs=8"), "workerTemplate": lwsPodSpec("worker")}},
			map[string]any{"replicas": int64(2), "readyReplicas": int64(1)}),
		lws("defaults", map[string]any{"leaderWorkerTemplate": map[string]any{"workerTemplate": lwsPodSpec("worker")}}, nil),
		lws("malformed", map[string]any{"replicas": int64(3), "leaderWorkerTemplate": map[string]any{
			"workerTemplate": map[string]any{"spec": map[string]any{"containers": "not a list"}}}}, nil),
	)
	withLWS := TargetListers{
		Deployments:      appslisters.NewDeploymentLister(indexer(t, deploy, noSelector, badSelector)),
		StatefulSets:     appslisters.NewStatefulSetLister(indexer(t, sts)),
		LeaderWorkerSets: cache.NewGenericLister(lwsIdx, llmdv1alpha1.LeaderWorkerSetResource.GroupResource()),
	}
	withoutLWS := withLWS
	withoutLWS.LeaderWorkerSets = nil

	type want struct {
		replicas, ready, perReplica int32
		rv                          string
		nodeSelector                string       // the template's pool
		serves, holds, other        []labels.Set // pods ServingSelector and PodSelector match, and pods neither matches
		reason, message             string
	}
	cases := []struct {
		name    string
		listers TargetListers
		va      *llmdv1alpha1.VariantAutoscaling
		want    want
	}{
		{"deployment", withLWS, targetVA("Deployment", "l4"),
			want{replicas: 4, ready: 3, perReplica: 1, rv: "7", nodeSelector: "l4",
				serves: []labels.Set{l4}, holds: []labels.Set{l4}, other: []labels.Set{{"app": "h100"}}}},
		{"statefulset without replicas defaults to 1", withLWS, targetVA("StatefulSet", "h100"),
			want{replicas: 1, perReplica: 1, serves: []labels.Set{{"app": "h100"}}, holds: []labels.Set{{"app": "h100"}}, other: []labels.Set{l4}}},
		{"LWS: replicas are groups of size pods, the leader serves, the leader's template", withLWS, targetVA("LeaderWorkerSet", "big"),
			want{replicas: 2, ready: 1, perReplica: 4, rv: "42", nodeSelector: "leader",
				serves: []labels.Set{lwsPod("big", "0")}, holds: []labels.Set{lwsPod("big", "0"), lwsPod("big", "3")},
				other: []labels.Set{lwsPod("defaults", "0"), l4}}},
		{"LWS defaults: 1 group of 1 pod, the workers' template for the leader", withLWS, targetVA("LeaderWorkerSet", "defaults"),
			want{replicas: 1, perReplica: 1, rv: "42", nodeSelector: "worker",
				serves: []labels.Set{lwsPod("defaults", "0")}, holds: []labels.Set{lwsPod("defaults", "0")}, other: []labels.Set{lwsPod("big", "0")}}},
		{"LWS with a malformed template still resolves, with an empty template", withLWS, targetVA("LeaderWorkerSet", "malformed"),
			want{replicas: 3, perReplica: 1, rv: "42", serves: []labels.Set{lwsPod("malformed", "0")}, holds: []labels.Set{lwsPod("malformed", "1")}}},
		{"missing deployment", withLWS, targetVA("Deployment", "nope"),
			want{reason: llmdv1alpha1.ReasonTargetNotFound, message: "Deployment prod/nope not found"}},
		{"missing LWS", withLWS, targetVA("LeaderWorkerSet", "nope"),
			want{reason: llmdv1alpha1.ReasonTargetNotFound, message: "LeaderWorkerSet prod/nope not found"}},
		{"LWS without the API installed", withoutLWS, targetVA("LeaderWorkerSet", "big"),
			want{reason: llmdv1alpha1.ReasonUnsupportedTargetKind, message: "LeaderWorkerSet API (leaderworkerset.x-k8s.io) is not installed in the cluster"}},
		{"unsupported kind", withLWS, targetVA("ReplicaSet", "rs"), want{reason: llmdv1alpha1.ReasonUnsupportedTargetKind}},
		{"empty selector would match every pod", withLWS, targetVA("Deployment", "bare"),
			want{reason: llmdv1alpha1.ReasonTargetNotFound, message: "scale target has an empty pod selector"}},
		{"invalid selector", withLWS, targetVA("Deployment", "bad"), want{reason: llmdv1alpha1.ReasonTargetNotFound}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveTarget(tc.listers, tc.va)
			if tc.want.reason != "" {
				var u *Unresolved
				require.ErrorAs(t, err, &u)
				assert.Equal(t, tc.want.reason, u.Reason)
				if tc.want.message != "" {
					assert.Equal(t, tc.want.message, u.Message)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.va.Spec.ScaleTargetRef.Kind, got.GVK.Kind)
			assert.Equal(t, [2]string{"prod", tc.va.Spec.ScaleTargetRef.Name}, [2]string{got.Namespace, got.Name})
			assert.Equal(t, [3]int32{tc.want.replicas, tc.want.ready, tc.want.perReplica}, [3]int32{got.Replicas, got.ReadyReplicas, got.PodsPerReplica},
				"replicas, ready replicas, pods per replica")
			assert.Equal(t, tc.want.rv, got.ResourceVersion)
			assert.Equal(t, tc.want.nodeSelector, got.Template.NodeSelector["pool"])
			for _, s := range tc.want.serves {
				assert.True(t, got.ServingSelector.Matches(s), "serving %v", s)
			}
			for _, s := range tc.want.holds {
				assert.True(t, got.PodSelector.Matches(s), "holds %v", s)
			}
			for _, s := range tc.want.other {
				assert.False(t, got.PodSelector.Matches(s), "not its pod: %v", s)
				assert.False(t, got.ServingSelector.Matches(s), "not its pod: %v", s)
			}
			if tc.va.Spec.ScaleTargetRef.Kind == llmdv1alpha1.ScaleTargetKindLeaderWorkerSet {
				assert.False(t, got.ServingSelector.Matches(lwsPod(got.Name, "1")), "a worker does not serve")
			}
		})
	}
}
