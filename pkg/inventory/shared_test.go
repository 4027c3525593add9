package inventory

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

func decide(t *testing.T, m *Memory, va *llmdv1alpha1.VariantAutoscaling, n int32, at time.Time) {
	t.Helper()
	m.WriteStatus(va, llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{
		NumReplicas: n, Reason: fmt.Sprintf("scale to %d", n), LastRunTime: metav1.NewTime(at)}})
}

// A follower serves, through the same Lister, what the leader persisted:
// the same decision, reason, decidedAt and source object; variants without
// a decision are not persisted.
func TestPersistedDecisionsServeOnFollower(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	leader := &Memory{}
	h, err := FromHPA(hpa("h", "d", managed("m")))
	require.NoError(t, err)
	so, err := FromScaledObject(scaledObject("s", managed("m"), "name", "e"))
	require.NoError(t, err)
	undecided, err := FromHPA(hpa("u", "f", managed("m")))
	require.NoError(t, err)
	leader.Sync([]*llmdv1alpha1.VariantAutoscaling{h, so, undecided})
	decide(t, leader, h, 3, at)
	decide(t, leader, so, 0, at.Add(-time.Hour))

	data, dropped := leader.Persisted()
	require.Zero(t, dropped)
	require.Len(t, data, 2, "the undecided variant is left out")
	for k := range data {
		assert.Empty(t, validation.IsConfigMapKey(k), k)
	}

	notified := 0
	follower := &Memory{Changed: func() { notified++ }}
	follower.Restore(data)
	assert.Equal(t, 1, notified)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	l := Lister(llmdlisters.NewVariantAutoscalingLister(idx), follower)
	cases := []struct {
		name   string
		want   int32
		at     time.Time
		source string
	}{
		{"h", 3, at, "HorizontalPodAutoscaler"},
		{"s", 0, at.Add(-time.Hour), "ScaledObject"}, // old decidedAt kept: served as stale
	}
	for _, c := range cases {
		got, err := l.VariantAutoscalings("prod").Get(c.name)
		require.NoError(t, err, c.name)
		alloc := got.Status.DesiredOptimizedAlloc
		assert.Equal(t, c.want, alloc.NumReplicas, c.name)
		assert.Equal(t, fmt.Sprintf("scale to %d", c.want), alloc.Reason, c.name)
		assert.True(t, alloc.LastRunTime.Time.Equal(c.at), "%s: decidedAt %s", c.name, alloc.LastRunTime)
		src, ok := SourceOf(got)
		require.True(t, ok, c.name)
		assert.Equal(t, c.source, src.Kind, c.name)
	}
	_, err = l.VariantAutoscalings("prod").Get("u")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)

	// Persisting what the follower restored gives the same data: a new
	// leader does not rewrite it before deciding.
	again, _ := follower.Persisted()
	assert.Equal(t, data, again)
	follower.Restore(data)
	assert.Equal(t, 1, notified, "the same decisions again notify no one")

	// A new leader's first inventory pass keeps the persisted status (same
	// UID) until its engine decides.
	fresh, _ := FromHPA(hpa("h", "d", managed("m")))
	follower.Sync([]*llmdv1alpha1.VariantAutoscaling{fresh})
	got, err := l.VariantAutoscalings("prod").Get("h")
	require.NoError(t, err)
	assert.Equal(t, int32(3), got.Status.DesiredOptimizedAlloc.NumReplicas)
	assert.Equal(t, "m", got.Spec.ModelID, "the inventory's variant, with its spec")

	follower.Restore(nil)
	_, err = l.VariantAutoscalings("prod").Get("s")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// Persisted stays within MaxDecisionsBytes and reports what it left out.
func TestPersistedBounded(t *testing.T) {
	m := &Memory{}
	var vas []*llmdv1alpha1.VariantAutoscaling
	for i := range 5000 {
		va, err := FromHPA(hpa(fmt.Sprintf("h-%05d", i), "d", managed("m")))
		require.NoError(t, err)
		vas = append(vas, va)
	}
	m.Sync(vas)
	for _, va := range vas {
		decide(t, m, va, 1, time.Now())
	}
	data, dropped := m.Persisted()
	total := 0
	for _, v := range data {
		total += len(v)
	}
	assert.LessOrEqual(t, total, MaxDecisionsBytes)
	assert.Positive(t, dropped)
	assert.Equal(t, 5000, len(data)+dropped)
}
