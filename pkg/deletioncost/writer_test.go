package deletioncost

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The real API server and ReplicaSet controller are in
// test/integration/deletioncost_test.go; this pins which pods are patched.
func TestWriterPatchesOnlyChangedCosts(t *testing.T) {
	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Annotations: annotations}}
	}
	pods := []runtime.Object{
		pod("same", map[string]string{Annotation: "3"}),
		pod("changed", map[string]string{Annotation: "3"}),
		pod("new", nil),
		pod("unknown-with", map[string]string{Annotation: "5", "keep": "me"}),
		pod("unknown-without", nil),
	}
	client := fake.NewClientset(pods...)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		require.NoError(t, indexer.Add(p))
	}
	w := Writer{Client: client, Pods: corelisters.NewPodLister(indexer)}
	n, err := w.WriteCosts(context.Background(), "prod", map[string]*int32{
		"same": ptr.To[int32](3), "changed": ptr.To[int32](0), "new": ptr.To[int32](8),
		"unknown-with": nil, "unknown-without": nil, "gone": ptr.To[int32](1),
	})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	var patchedPods []string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patchedPods = append(patchedPods, p.GetName())
		}
	}
	assert.Equal(t, []string{"changed", "new", "unknown-with"}, patchedPods, "sorted, only the changed ones")
	get := func(name string) map[string]string {
		p, err := client.CoreV1().Pods("prod").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return p.Annotations
	}
	assert.Equal(t, map[string]string{Annotation: "0"}, get("changed"))
	assert.Equal(t, map[string]string{Annotation: "8"}, get("new"))
	assert.Equal(t, map[string]string{"keep": "me"}, get("unknown-with"), "removed, other annotations kept")
}

func TestWriterReportsFailures(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "a"}}
	client := fake.NewClientset(p)
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(p))
	n, err := Writer{Client: client, Pods: corelisters.NewPodLister(indexer)}.WriteCosts(context.Background(), "prod", map[string]*int32{"a": ptr.To[int32](1)})
	assert.Equal(t, 0, n)
	assert.ErrorContains(t, err, "pod prod/a: forbidden")
}
