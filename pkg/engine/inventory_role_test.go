package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/inventory"
)

// The inventory feeds the engine (ViewSource); this test runs the real
// inventory into the engine's plans, so it lives on the engine's side.

func roleIndexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, idx.Add(o))
	}
	return idx
}

func roleVA(kind, target string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: target},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m",
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: kind, Name: target}},
	}
}

// TestRoleReachesTheVariant: the role label of each kind of scale target's
// pod template reaches the variant the pipeline decides, through the
// informers' trimmed caches.
func TestRoleReachesTheVariant(t *testing.T) {
	role := func(r string) map[string]string { return map[string]string{llmdv1alpha1.LabelRole: r, "app": "a"} }
	deploy := func(name string, tmpl map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl}}}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "sts"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sts"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: role("prefill")}}}}
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": "prod", "name": "lws"},
		"spec": map[string]any{"leaderWorkerTemplate": map[string]any{
			"leaderTemplate": map[string]any{"metadata": map[string]any{"labels": map[string]any{llmdv1alpha1.LabelRole: "decode"}}, "spec": map[string]any{}},
			"workerTemplate": map[string]any{"metadata": map[string]any{"labels": map[string]any{llmdv1alpha1.LabelRole: "prefill"}}}}}}}
	deploys := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, d := range []*appsv1.Deployment{deploy("decode", role("decode")), deploy("prefill", role("prefill")),
		deploy("unlabeled", nil), deploy("typo", role("decoder"))} {
		obj, err := inventory.DeploymentTransform(d)
		assert.NoError(t, err)
		assert.NoError(t, deploys.Add(obj))
	}
	trimmedSTS, err := inventory.StatefulSetTransform(sts)
	assert.NoError(t, err)
	inv := &inventory.Inventory{
		Deployments:      appslisters.NewDeploymentLister(deploys),
		StatefulSets:     appslisters.NewStatefulSetLister(roleIndexer(t, trimmedSTS)),
		LeaderWorkerSets: cache.NewGenericLister(roleIndexer(t, lws), llmdv1alpha1.LeaderWorkerSetResource.GroupResource()),
		Pods:             corelisters.NewPodLister(roleIndexer(t)),
	}
	for _, tc := range []struct {
		kind, name string
		want       decision.Role
	}{
		{"Deployment", "decode", decision.RoleDecode},
		{"Deployment", "prefill", decision.RolePrefill},
		{"Deployment", "unlabeled", decision.RoleBoth},
		{"Deployment", "typo", decision.RoleBoth},
		{"StatefulSet", "sts", decision.RolePrefill},
		{"LeaderWorkerSet", "lws", decision.RoleDecode}, // the leader's template, as for the engine args
	} {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			va := roleVA(tc.kind, tc.name)
			target := inv.Resolve(va)
			assert.True(t, target.Resolved, target.Message)
			plans := decide.BuildPlans([]decide.View{{VA: va, Target: target}}, collector.Result{}, nil,
				func(m, ns string) params.Resolved { return config.NewStore().Resolve(m, ns) })
			if assert.Len(t, plans, 1) && assert.Len(t, plans[0].Input.Group.Variants, 1) {
				assert.Equal(t, tc.want, plans[0].Input.Group.Variants[0].Role)
			}
		})
	}
}
