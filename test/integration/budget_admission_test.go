package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/engine"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestAdapterAdmitsScaleUpsAgainstTheBudget runs `wva adapter` with a budget
// ConfigMap of two pools on the real API server, with variants of two
// namespaces. team-a/small's minReplicas asks for +2 replicas in pool-a,
// whose GPU memory team-b/big mostly holds: the scale-up is cut to +1 and
// its reason, its GPUBudgeted condition and a Warning Event name
// team-b/big's model. Two variants no pool fully covers (no pool; pool-b
// limits memory and the variant sets no gpuMemoryPerReplica) get
// GPUBudgeted=False with their reasons. team-b's ResourceQuota on
// requests.nvidia.com/gpu cuts team-b/capped's scale-up to less than its
// pool allows, and the condition names the quota.
func TestAdapterAdmitsScaleUpsAgainstTheBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "team-a", "team-b")

	_, err := cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wva-gpu-budget"},
		Data: map[string]string{
			"pool-a": "nodeSelector: {pool: a}\ngpus: 8\ngpuMemory: 160Gi",
			"pool-b": "nodeSelector: {pool: b}\ngpuMemory: 80Gi",
		}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// No pods (no metrics): the engine's first-run decision is the current
	// replicas raised to minReplicas.
	variant := func(ns, name, model, pool string, current, min int32, gpus int32, mem string) {
		servingVariant(ctx, t, cs, ns, name, current, nil)
		va := newVA(ns, name, model, "10", min, 8)
		if pool != "" {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationNodePool: pool}
		}
		va.Spec.GPUsPerReplica = ptr.To(gpus)
		if mem != "" {
			va.Spec.GPUMemoryPerReplica = ptr.To(resource.MustParse(mem))
		}
		_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	variant("team-b", "big", "org/big", "pool-a", 2, 2, 2, "60Gi")       // holds 4 GPUs, 120Gi of pool-a
	variant("team-a", "small", "org/small", "pool-a", 1, 3, 1, "20Gi")   // 20Gi held, wants +2 x 20Gi, 20Gi left
	variant("team-b", "loose", "org/loose", "", 1, 1, 1, "20Gi")         // in no pool
	variant("team-a", "nomem", "org/nomem", "pool-b", 1, 1, 1, "")       // pool-b limits memory
	variant("team-b", "capped", "org/capped", "pool-b", 1, 3, 2, "10Gi") // pool-b has room for +2, team-b's quota for +1
	// team-b's variants hold 2x2 + 1 + 1x2 = 7 GPUs by spec (no pods yet).
	_, err = cs.CoreV1().ResourceQuotas("team-b").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("9")}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{})
	cert, key := adapterServingCert(t, cluster)
	startAdapter(ctx, t, cluster, prom.URL, cert, key, "--budget-configmap=wva-gpu-budget")

	get := func(ns, name string) (*llmdv1alpha1.VariantAutoscaling, error) {
		return wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, name, metav1.GetOptions{})
	}
	budgeted := func(ns, name string, status metav1.ConditionStatus, reason string, msgParts ...string) func() (bool, string) {
		return func() (bool, string) {
			va, err := get(ns, name)
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted)
			if c == nil {
				return false, fmt_(va.Status.Conditions, nil)
			}
			ok := c.Status == status && c.Reason == reason
			for _, p := range msgParts {
				ok = ok && strings.Contains(c.Message, p)
			}
			return ok, fmt_(*c, nil)
		}
	}
	const blocker = "held by team-b/big (model org/big, 4 GPUs, 120Gi GPU memory)"

	t.Run("a scale-up the memory budget cuts names the other namespace's model", func(t *testing.T) {
		testenv.Eventually(ctx, t, "team-a/small cut to 2, reason names team-b/big", func() (bool, string) {
			va, err := get("team-a", "small")
			if err != nil {
				return false, err.Error()
			}
			a := va.Status.DesiredOptimizedAlloc
			return a.NumReplicas == 2 && strings.Contains(a.Reason, "GPU budget: team-a/small +2 (1 GPUs, 20Gi GPU memory each) cut to +1") &&
				strings.Contains(a.Reason, blocker), fmt_(a, nil)
		})
		testenv.Eventually(ctx, t, "GPUBudgeted=True names pool-a and the blocker", budgeted("team-a", "small", metav1.ConditionTrue,
			llmdv1alpha1.ReasonBudgeted, "pool pool-a (budget 8 GPUs, 160Gi GPU memory)", blocker))
		testenv.Eventually(ctx, t, "a Warning Event names the blocker", func() (bool, string) {
			evs, err := cs.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", engine.ReasonGPUBudgetExceeded).String()})
			if err != nil || len(evs.Items) == 0 {
				return false, fmt_(evs, err)
			}
			e := evs.Items[0]
			return e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "small" && strings.Contains(e.Message, blocker), e.Message
		})
		testenv.Eventually(ctx, t, "team-b/big is budgeted and not cut", budgeted("team-b", "big", metav1.ConditionTrue, llmdv1alpha1.ReasonBudgeted))
	})

	t.Run("a namespace's GPU quota cuts a scale-up its pool has room for", func(t *testing.T) {
		const quotaCut = "GPU quota: team-b/capped +2 (2 GPUs each) cut to +1: ResourceQuota team-b/gpus (hard 9 GPUs, used 7) has 2 GPUs left"
		testenv.Eventually(ctx, t, "team-b/capped cut to 2 by the quota", func() (bool, string) {
			va, err := get("team-b", "capped")
			if err != nil {
				return false, err.Error()
			}
			a := va.Status.DesiredOptimizedAlloc
			return a.NumReplicas == 2 && strings.Contains(a.Reason, quotaCut), fmt_(a, nil)
		})
		testenv.Eventually(ctx, t, "GPUBudgeted names the quota", budgeted("team-b", "capped", metav1.ConditionTrue,
			llmdv1alpha1.ReasonBudgeted, "last scale-up: "+quotaCut))
	})

	t.Run("unbudgeted variants get GPUBudgeted=False", func(t *testing.T) {
		testenv.Eventually(ctx, t, "team-b/loose: NoPool", budgeted("team-b", "loose", metav1.ConditionFalse, llmdv1alpha1.ReasonNoPool))
		testenv.Eventually(ctx, t, "team-a/nomem: NoGPUMemoryPerReplica", budgeted("team-a", "nomem", metav1.ConditionFalse,
			llmdv1alpha1.ReasonNoGPUMemoryPerReplica, "pool pool-b limits GPU memory"))
	})
}
