package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// hpaRig is a control plane with the HPA controller, the adapter in
// follower mode (the test holds its Lease, so the engine never runs and the
// test writes the decision of record itself), and `wva controller`.
type hpaRig struct {
	cluster *harness.Cluster
	kube    kubernetes.Interface
	wva     versioned.Interface
	ctrl    *adapterProcess
}

func startHPARig(ctx context.Context, t *testing.T, gates map[string]bool, controllerFlags ...string) *hpaRig {
	t.Helper()
	cluster := harness.StartT(t, harness.Options{FeatureGates: gates})
	// The CRD first: the garbage collector then knows VAs from its first
	// discovery instead of its next 30 s resync.
	installCRD(ctx, t, cluster)
	cluster.StartControllerManagerT(t, harness.ControllerManagerOptions{HPASyncPeriod: time.Second, FeatureGates: gates})
	r := &hpaRig{cluster: cluster, kube: cluster.Clientset()}
	var err error
	r.wva, err = versioned.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	createNamespace(ctx, t, r.kube, "wva-system")
	createNamespace(ctx, t, r.kube, "prod")

	holdAdapterLease(ctx, t, r.kube)
	startAdapterAPIService(ctx, t, cluster, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		"--leader-elect=true", "--leader-election-namespace=wva-system")

	r.ctrl = startController(ctx, t, cluster, append([]string{"--probe-namespace=wva-system", "--resync=2s", "--v=2"}, controllerFlags...)...)
	return r
}

// startWVAProcess runs a wva subcommand and waits until it is ready.
func startWVAProcess(ctx context.Context, t *testing.T, what string, args []string) *adapterProcess {
	t.Helper()
	return &adapterProcess{Process: testenv.StartProcess(ctx, t, what, wvaBinary, args...)}
}

// decide writes the decision of record, as the adapter's engine would.
func (r *hpaRig) decide(ctx context.Context, t *testing.T, name string, replicas int32) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		va, err := r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		va.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: replicas, Reason: "set by the test", LastRunTime: now, LastUpdate: now}
		_, err = r.wva.LlmdV1alpha1().VariantAutoscalings("prod").UpdateStatus(ctx, va, metav1.UpdateOptions{})
		return err
	}))
}

func (r *hpaRig) waitReplicas(ctx context.Context, t *testing.T, deployment string, want int32) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.Eventually(ctx, t, fmt.Sprintf("%s at %d replicas", deployment, want), func() (bool, string) {
		d, err := r.kube.AppsV1().Deployments("prod").Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return *d.Spec.Replicas == want, fmt.Sprint(*d.Spec.Replicas)
	})
	return time.Since(start)
}

func (r *hpaRig) hpa(ctx context.Context, t *testing.T, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var h *autoscalingv2.HorizontalPodAutoscaler
	testenv.Eventually(ctx, t, "HPA "+name+" exists", func() (bool, string) {
		var err error
		h, err = r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, name, metav1.GetOptions{})
		return err == nil, fmt_(nil, err)
	})
	return h
}

func (r *hpaRig) updateVA(ctx context.Context, t *testing.T, name string, mutate func(*llmdv1alpha1.VariantAutoscaling)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		va, err := r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(va)
		_, err = r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Update(ctx, va, metav1.UpdateOptions{})
		return err
	}))
}

// TestControllerFollowsDecisions: on 1.37 defaults (configurable tolerance,
// HPAScaleToZero) a stock HPA built by `wva controller` carries out every
// decision, including the 5% steps a default-tolerance HPA ignores.
func TestControllerFollowsDecisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startHPARig(ctx, t, nil)

	servingVariant(ctx, t, r.kube, "prod", "llama-l4", 1, nil)
	va := newVA("prod", "llama-l4", "meta/llama", "5", 1, 30)
	// Scale down without the default 30 s window so 21 -> 20 is quick.
	va.Annotations = map[string]string{llmdv1alpha1.AnnotationHPABehavior: "scaleDown:\n  stabilizationWindowSeconds: 0\n  policies: [{type: Percent, value: 100, periodSeconds: 1}]"}
	_, err := r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, va, metav1.CreateOptions{})
	require.NoError(t, err)

	hpa := r.hpa(ctx, t, "llama-l4")
	t.Run("HPA built from the VA", func(t *testing.T) {
		assert.Equal(t, int32(1), *hpa.Spec.MinReplicas)
		assert.Equal(t, int32(30), hpa.Spec.MaxReplicas)
		assert.Equal(t, "wva_desired_replicas", hpa.Spec.Metrics[0].External.Metric.Name)
		require.NotNil(t, hpa.Spec.Behavior.ScaleUp.Tolerance, "tolerance kept: the probe found HPAConfigurableTolerance")
		assert.True(t, hpa.Spec.Behavior.ScaleUp.Tolerance.IsZero())
		assert.Equal(t, "llama-l4", hpa.OwnerReferences[0].Name)
	})

	t.Run("the Deployment reaches each decided count, 20 -> 21 -> 20 included", func(t *testing.T) {
		for _, n := range []int32{3, 20, 21, 20} {
			r.decide(ctx, t, "llama-l4", n)
			took := r.waitReplicas(ctx, t, "llama-l4", n)
			t.Logf("decision %d carried out by the HPA in %s", n, took.Round(100*time.Millisecond))
		}
		testenv.Eventually(ctx, t, "actuation.applied and HPAReady", func() (bool, string) {
			got, err := r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return got.Status.Actuation.Applied && meta.IsStatusConditionTrue(got.Status.Conditions, llmdv1alpha1.ConditionTypeHPAReady), fmt_(got.Status, nil)
		})
	})

	t.Run("min/max edits on the VA reach the HPA", func(t *testing.T) {
		r.updateVA(ctx, t, "llama-l4", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Spec.MaxReplicas = 25
			va.Spec.MinReplicas = ptr.To[int32](2)
		})
		testenv.Eventually(ctx, t, "HPA max 25 min 2", func() (bool, string) {
			h := r.hpa(ctx, t, "llama-l4")
			return h.Spec.MaxReplicas == 25 && *h.Spec.MinReplicas == 2, fmt.Sprint(*h.Spec.MinReplicas, h.Spec.MaxReplicas)
		})
	})

	t.Run("a hand-edited HPA is restored", func(t *testing.T) {
		_, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Patch(ctx, "llama-l4", types.MergePatchType,
			[]byte(`{"spec":{"maxReplicas":99,"minReplicas":7}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "HPA restored", func() (bool, string) {
			h := r.hpa(ctx, t, "llama-l4")
			return h.Spec.MaxReplicas == 25 && *h.Spec.MinReplicas == 2, fmt.Sprint(*h.Spec.MinReplicas, h.Spec.MaxReplicas)
		})
		require.NoError(t, r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "deleted HPA recreated", func() (bool, string) {
			h, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			return err == nil && h.DeletionTimestamp == nil, fmt_(nil, err)
		})
	})

	t.Run("decision 0: the HPA itself scales to zero (HPAScaleToZero)", func(t *testing.T) {
		r.updateVA(ctx, t, "llama-l4", func(va *llmdv1alpha1.VariantAutoscaling) { va.Spec.MinReplicas = ptr.To[int32](0) })
		testenv.Eventually(ctx, t, "HPA min 0", func() (bool, string) {
			h := r.hpa(ctx, t, "llama-l4")
			return *h.Spec.MinReplicas == 0, fmt.Sprint(*h.Spec.MinReplicas)
		})
		r.decide(ctx, t, "llama-l4", 0)
		r.waitReplicas(ctx, t, "llama-l4", 0)
		r.decide(ctx, t, "llama-l4", 2)
		r.waitReplicas(ctx, t, "llama-l4", 2)
	})

	t.Run("an HPA wva does not own is reported, not overwritten", func(t *testing.T) {
		servingVariant(ctx, t, r.kube, "prod", "llama-h100", 1, nil)
		theirs := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llama-h100"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-h100"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}},
			},
		}
		_, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Create(ctx, theirs, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-h100", "meta/llama", "15", 1, 4), metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "HPAReady=False HPAConflict",
			hpaReadyIs(ctx, r.wva, "prod", "llama-h100", metav1.ConditionFalse, llmdv1alpha1.ReasonHPAConflict, ""))
		h := r.hpa(ctx, t, "llama-h100")
		assert.Equal(t, int32(3), h.Spec.MaxReplicas, "not overwritten")
		assert.Equal(t, autoscalingv2.ResourceMetricSourceType, h.Spec.Metrics[0].Type)

		r.updateVA(ctx, t, "llama-h100", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationAdoptHPA: "true"}
		})
		testenv.Eventually(ctx, t, "adopted", func() (bool, string) {
			h := r.hpa(ctx, t, "llama-h100")
			return h.Spec.MaxReplicas == 4 && h.Spec.Metrics[0].Type == autoscalingv2.ExternalMetricSourceType, fmt.Sprint(h.Spec.MaxReplicas)
		})
	})

	t.Run("a foreign HPA made after wva's is a conflict; the older one stays", func(t *testing.T) {
		own := r.hpa(ctx, t, "llama-l4")
		late := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "late-hpa"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}},
			},
		}
		_, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Create(ctx, late, metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "HPAReady=False HPAConflict naming late-hpa",
			hpaReadyIs(ctx, r.wva, "prod", "llama-l4", metav1.ConditionFalse, llmdv1alpha1.ReasonHPAConflict, "HPA late-hpa also scales Deployment llama-l4"))
		assert.Equal(t, own.UID, r.hpa(ctx, t, "llama-l4").UID, "wva's HPA, the older, stays")

		require.NoError(t, r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Delete(ctx, "late-hpa", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "HPAReady=True HPASynced once late-hpa is gone",
			hpaReadyIs(ctx, r.wva, "prod", "llama-l4", metav1.ConditionTrue, llmdv1alpha1.ReasonHPASynced, ""))
	})

	t.Run("deleting the VA deletes its HPA", func(t *testing.T) {
		require.NoError(t, r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "HPA garbage-collected", func() (bool, string) {
			_, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt_(nil, err)
		})
	})
}

// TestControllerWithoutHPAGates: a cluster whose HPA cannot scale to zero
// (HPAScaleToZero off) and a controller told the HPA has no configurable
// tolerance. The controller then owns 0 <-> N and the in-band steps.
func TestControllerWithoutHPAGates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startHPARig(ctx, t, map[string]bool{"HPAScaleToZero": false}, "--hpa-tolerance=false")

	servingVariant(ctx, t, r.kube, "prod", "llama-l4", 1, nil)
	_, err := r.wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama", "5", 0, 30), metav1.CreateOptions{})
	require.NoError(t, err)
	hpa := r.hpa(ctx, t, "llama-l4")
	assert.Equal(t, int32(1), *hpa.Spec.MinReplicas, "minReplicas 0 is not accepted here: the HPA keeps >= 1")
	assert.Nil(t, hpa.Spec.Behavior.ScaleUp.Tolerance)

	r.decide(ctx, t, "llama-l4", 20)
	r.waitReplicas(ctx, t, "llama-l4", 20)
	// 20 -> 21 is a 5% step: inside the default 10% band the HPA would
	// ignore it; the controller scales the target itself.
	r.decide(ctx, t, "llama-l4", 21)
	r.waitReplicas(ctx, t, "llama-l4", 21)
	// The HPA agrees (ratio 1.0) and does not undo it.
	time.Sleep(3 * time.Second)
	r.waitReplicas(ctx, t, "llama-l4", 21)

	r.decide(ctx, t, "llama-l4", 0)
	r.waitReplicas(ctx, t, "llama-l4", 0)
	testenv.Eventually(ctx, t, "HPA reports ScalingDisabled", func() (bool, string) {
		h := r.hpa(ctx, t, "llama-l4")
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				return c.Status == "False" && c.Reason == "ScalingDisabled", c.Reason
			}
		}
		return false, "no ScalingActive condition"
	})
	r.decide(ctx, t, "llama-l4", 1)
	r.waitReplicas(ctx, t, "llama-l4", 1)
	// Events are recorded asynchronously: the last one may land after the
	// scale it reports.
	testenv.Eventually(ctx, t, "20->21, 21->0 and 0->1 recorded as the controller's (ScaledTarget)", func() (bool, string) {
		events, err := r.kube.CoreV1().Events("prod").List(ctx, metav1.ListOptions{FieldSelector: "reason=ScaledTarget"})
		if err != nil {
			return false, err.Error()
		}
		return len(events.Items) >= 3, fmt.Sprintf("%d ScaledTarget events", len(events.Items))
	})
}
