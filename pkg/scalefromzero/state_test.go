package scalefromzero

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"

	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/inventory"
)

// budgetCluster: 8 GPUs in pool gpu-a, a running variant holding 6, and two
// groups at zero, one needing 4 GPUs per replica and one needing 2.
func budgetCluster() *cluster {
	c := newCluster()
	c.node("n1", "gpu-a", 8)
	c.node("n2", "other", 8)
	c.variant("prod", "big", "m-big", "10", 1, "gpu-a", 6)
	c.pod("prod", "big-0", "big", "n1", 6)
	c.variant("prod", "four", "m-four", "1", 0, "gpu-a", 4)
	c.variant("prod", "two", "m-two", "1", 0, "gpu-a", 2)
	return c
}

func TestBudgetSources(t *testing.T) {
	for name, mk := range map[string]func(*cluster) *State{
		"nodes": func(c *cluster) *State { return c.withNodeBudget(c.state()) },
		"configmap": func(c *cluster) *State {
			c.configMap("1", map[string]string{"gpu-a": "nodeSelector: {pool: gpu-a}\ngpus: 8"})
			return c.withConfigMapBudget(c.state())
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := budgetCluster()
			s := mk(c)
			snap, err := s.Snapshot(true, nil)
			require.NoError(t, err)
			u := snap.Usage["gpu-a"]
			assert.Equal(t, int64(8), u.Total.GPUs)
			assert.Equal(t, int64(6), u.Allocated.GPUs)

			four := Choose(snap.Groups[GroupKey{"prod", "m-four"}], snap.Ledger(budget.UnbudgetedUnlimited))
			assert.Equal(t, ResultBlocked, four.Result, "needs 4, 2 left")
			assert.Equal(t, []budget.Holder{{Name: "prod/big", Namespace: "prod", Model: "m-big", Amount: budget.Amount{GPUs: 6}}}, four.Blockers)
			two := Choose(snap.Groups[GroupKey{"prod", "m-two"}], snap.Ledger(budget.UnbudgetedUnlimited))
			assert.Equal(t, ResultScaled, two.Result, "needs 2, 2 left")
			assert.Equal(t, "two", two.Variant.Name)

			// Once "two" is woken (reserved before its pod exists), the
			// pool is full.
			c.variant("prod", "two-b", "m-two-b", "1", 0, "gpu-a", 2)
			snap, err = s.Snapshot(true, map[string]bool{"prod/two": true})
			require.NoError(t, err)
			assert.Equal(t, int64(8), snap.Usage["gpu-a"].Allocated.GPUs)
			assert.Equal(t, ResultBlocked, Choose(snap.Groups[GroupKey{"prod", "m-two-b"}], snap.Ledger(budget.UnbudgetedUnlimited)).Result)
		})
	}
}

func TestConfigMapBudgetLastValidStays(t *testing.T) {
	c := budgetCluster()
	s := c.withConfigMapBudget(c.state())

	snap, err := s.Snapshot(true, nil)
	require.NoError(t, err)
	assert.Nil(t, snap.Usage, "no ConfigMap: no pools, no limit")
	assert.Equal(t, ResultScaled, Choose(snap.Groups[GroupKey{"prod", "m-four"}], snap.Ledger(budget.UnbudgetedUnlimited)).Result)
	annotated := c.variant("prod", "pinned", "m-pinned", "1", 0, "", 4)
	annotated.Annotations = map[string]string{llmdv1alpha1.AnnotationNodePool: "gpu-a"}
	_ = c.vas.Update(annotated)
	snap, _ = s.Snapshot(true, nil)
	assert.Equal(t, ResultScaled, Choose(snap.Groups[GroupKey{"prod", "m-pinned"}], snap.Ledger(budget.UnbudgetedUnlimited)).Result, "even a pinned variant")
	_ = c.vas.Delete(annotated)

	c.configMap("1", map[string]string{"gpu-a": "nodeSelector: {pool: gpu-a}\ngpus: 8"})
	snap, _ = s.Snapshot(true, nil)
	assert.Equal(t, ResultBlocked, Choose(snap.Groups[GroupKey{"prod", "m-four"}], snap.Ledger(budget.UnbudgetedUnlimited)).Result)

	c.configMap("2", map[string]string{"gpu-a": "nodeSelector: {pool: gpu-a}\ngpus: -3"})
	snap, _ = s.Snapshot(true, nil)
	assert.Equal(t, int64(8), snap.Usage["gpu-a"].Total.GPUs, "an invalid edit keeps the last valid budget")

	c.configMap("3", map[string]string{"gpu-a": "nodeSelector: {pool: gpu-a}\ngpus: 16"})
	snap, _ = s.Snapshot(true, nil)
	assert.Equal(t, ResultScaled, Choose(snap.Groups[GroupKey{"prod", "m-four"}], snap.Ledger(budget.UnbudgetedUnlimited)).Result)
}

func TestSnapshotGroups(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	c.variant("prod", "h100", "llama", "15", 0, "", 1)
	c.variant("dev", "l4", "llama", "5", 2, "", 1)
	bad := c.variant("prod", "missing-target", "llama", "1", 0, "", 1)
	_ = c.deploys.Delete(bad) // same namespace/name as the VA: the Deployment is gone
	snap, err := c.state().Snapshot(false, nil)
	require.NoError(t, err)
	require.Len(t, snap.Groups, 2)
	g := snap.Groups[GroupKey{"prod", "llama"}]
	assert.Len(t, g.Variants, 2, "a variant whose target is missing is left out")
	assert.True(t, g.AtZero())
	assert.False(t, snap.Groups[GroupKey{"dev", "llama"}].AtZero())
	assert.Equal(t, []Group{g}, snap.ZeroGroups()[:1])
	assert.Nil(t, snap.Ledger(budget.UnbudgetedUnlimited))
	assert.Equal(t, "1", g.Variants[0].Target.ResourceVersion)
}

func TestSnapshotLeaderWorkerSet(t *testing.T) {
	c := newCluster()
	va := c.variant("prod", "big", "llama-405b", "40", 0, "", 8)
	_ = c.deploys.Delete(mustGet(c.deploys, "prod/big"))
	va.Spec.ScaleTargetRef = llmdv1alpha1.CrossVersionObjectReference{Kind: "LeaderWorkerSet", Name: "big"}
	_ = c.vas.Update(va)
	lws := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = lws.Add(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": "prod", "name": "big", "resourceVersion": "42"},
		"spec": map[string]any{"replicas": int64(0), "leaderWorkerTemplate": map[string]any{"workerTemplate": map[string]any{
			"spec": map[string]any{"nodeSelector": map[string]any{"pool": "h100"}}}}},
	}})
	s := c.state()
	s.LeaderWorkerSets = cache.NewGenericLister(lws, schema.GroupResource{Group: "leaderworkerset.x-k8s.io", Resource: "leaderworkersets"})
	snap, err := s.Snapshot(false, nil)
	require.NoError(t, err)
	g := snap.Groups[GroupKey{"prod", "llama-405b"}]
	require.Len(t, g.Variants, 1)
	assert.True(t, g.AtZero())
	assert.Equal(t, Target{GVK: schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"},
		Namespace: "prod", Name: "big", ResourceVersion: "42"}, g.Variants[0].Target)

	r, err := inventory.ResolveTarget(s.targets(), va)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"pool": "h100"}, r.Template.NodeSelector)
	assert.True(t, r.PodSelector.Matches(labels.Set{llmdv1alpha1.LabelLWSName: "big"}))

	s.LeaderWorkerSets = nil
	snap, err = s.Snapshot(false, nil)
	require.NoError(t, err)
	assert.Empty(t, snap.Groups, "LWS API not installed: the variant is left out")
}
