package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestHPAOptInByAnnotations: a user-owned HPA carrying upstream WVA v0.9's
// opt-in annotations (no VariantAutoscaling) is a variant: the real HPA
// controller drives its Deployment to the adapter's decision, served as
// wva_desired_replicas{variant_name=<HPA name>}. A VA for the same target
// wins (one Warning Event on the HPA), and removing llm-d.ai/managed stops
// wva serving it while the Deployment stays where it is. wva never writes
// the HPA.
func TestHPAOptInByAnnotations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	// No Deployment or ReplicaSet controller: there is no kubelet, and pods
	// they would create stay pending, which holds the engine's decision.
	cluster.StartControllerManagerT(t, harness.ControllerManagerOptions{HPASyncPeriod: time.Second,
		Controllers: []string{"horizontal-pod-autoscaler-controller", "serviceaccount-controller", "garbage-collector-controller"}})

	// Two Ready pods at KV 0.5, the percentage analyzer under threshold
	// 0.55 / trigger 0.10: spare 0.05 < 0.10, so the engine decides a
	// scale-up from 2 to 3.
	const model = "meta/llama-3.1-8b"
	prom := optInFleet(ctx, t, cs, model)

	startAdapterAPIService(ctx, t, cluster, prom.URL)

	// The HPA as upstream documents it; its name is not the Deployment's,
	// so the selector proves variant_name is the HPA's name.
	const name = "llama-upstream"
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Annotations: map[string]string{
			llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: model, llmdv1alpha1.AnnotationVariantCost: "5"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: llmdv1alpha1.MetricDesiredReplicas,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{llmdv1alpha1.MetricLabelVariantName: name}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(1, resource.DecimalSI)},
			}}},
		},
	}
	created, err := cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Create(ctx, hpa, metav1.CreateOptions{})
	require.NoError(t, err)

	served := func() (int64, error) {
		list, err := getRaw(ctx, cs, "prod", name)
		if err != nil {
			return 0, err
		}
		if len(list.Items) != 1 {
			return 0, apierrors.NewInternalError(assert.AnError)
		}
		return list.Items[0].Value.Value(), nil
	}
	replicas := func() int32 {
		d, err := cs.AppsV1().Deployments("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
		require.NoError(t, err)
		return *d.Spec.Replicas
	}
	events := func(reason string) []corev1.Event {
		evs, err := cs.CoreV1().Events("prod").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("reason", reason)).String()})
		require.NoError(t, err)
		return evs.Items
	}

	t.Run("the HPA controller drives the Deployment to the adapter's decision", func(t *testing.T) {
		testenv.Eventually(ctx, t, "wva_desired_replicas{variant_name=llama-upstream} = 3", func() (bool, string) {
			v, err := served()
			return err == nil && v == 3, fmt_(v, err)
		})
		testenv.Eventually(ctx, t, "Deployment at 3 replicas", func() (bool, string) { return replicas() == 3, fmt_(replicas(), nil) })
		// The engine's Events about the variant name the HPA.
		testenv.Eventually(ctx, t, "DesiredReplicasChanged Event on the HPA", func() (bool, string) {
			evs := events("DesiredReplicasChanged")
			return len(evs) > 0 && evs[0].InvolvedObject.Kind == "HorizontalPodAutoscaler", fmt_(evs, nil)
		})
		// No VA object was created for it.
		vas, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, vas.Items)
	})

	t.Run("a VA for the same Deployment wins, with one Warning Event", func(t *testing.T) {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", model, "5", 1, 5), metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "ConflictingVariantAutoscaling Event on the HPA", func() (bool, string) {
			evs := events(llmdv1alpha1.ReasonConflictingVariantAutoscaling)
			return len(evs) == 1, fmt_(evs, nil)
		})
		testenv.Eventually(ctx, t, "the HPA's variant is no longer served", func() (bool, string) {
			_, err := served()
			return apierrors.IsNotFound(err), fmt_(nil, err)
		})
		// Many engine cycles later (1 s interval), still one Event of count 1.
		time.Sleep(4 * time.Second)
		evs := events(llmdv1alpha1.ReasonConflictingVariantAutoscaling)
		require.Len(t, evs, 1)
		assert.Equal(t, int32(1), evs[0].Count, "reported once per conflict, not per cycle")
		assert.Equal(t, corev1.EventTypeWarning, evs[0].Type)
		assert.Contains(t, evs[0].Message, "VariantAutoscaling llama-l4 also scales Deployment llama-l4")

		require.NoError(t, wva.LlmdV1alpha1().VariantAutoscalings("prod").Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "served again once the VA is gone", func() (bool, string) {
			v, err := served()
			return err == nil && v == 3, fmt_(v, err)
		})
	})

	setAnnotation := func(key, value string) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			h.Annotations[key] = value
			_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Update(ctx, h, metav1.UpdateOptions{})
			return err
		}))
	}

	t.Run("a bad llm-d.ai/gpus-per-replica leaves the HPA out with InvalidAnnotations; a good one is served", func(t *testing.T) {
		setAnnotation(llmdv1alpha1.AnnotationGPUsPerReplica, "many")
		testenv.Eventually(ctx, t, "InvalidAnnotations Event naming the annotation", func() (bool, string) {
			evs := events(llmdv1alpha1.ReasonInvalidAnnotations)
			return len(evs) == 1 && evs[0].Type == corev1.EventTypeWarning &&
				strings.Contains(evs[0].Message, llmdv1alpha1.AnnotationGPUsPerReplica) && strings.Contains(evs[0].Message, `"many"`), fmt_(evs, nil)
		})
		testenv.Eventually(ctx, t, "not served on its other annotations", func() (bool, string) {
			_, err := served()
			return apierrors.IsNotFound(err), fmt_(nil, err)
		})
		setAnnotation(llmdv1alpha1.AnnotationGPUsPerReplica, "4")
		testenv.Eventually(ctx, t, "served again with gpus-per-replica 4", func() (bool, string) {
			v, err := served()
			return err == nil && v == 3, fmt_(v, err)
		})
	})

	// The API server enforces spec.scaleToZeroRetention's bounds (the CEL
	// rule the annotation's parse mirrors); dry runs store nothing.
	t.Run("the CRD validates scaleToZeroRetention", func(t *testing.T) {
		for value, ok := range map[string]bool{"30m": true, "1m": true, "168h": true, "30s": false, "169h": false} {
			d, err := time.ParseDuration(value)
			require.NoError(t, err)
			va := newVA("prod", "retention-check", model, "5", 0, 2)
			va.Spec.ScaleTargetRef.Name = "retention-check"
			va.Spec.ScaleToZeroRetention = &metav1.Duration{Duration: d}
			_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, va, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if ok {
				assert.NoError(t, err, value)
			} else {
				assert.True(t, apierrors.IsInvalid(err), "%s: %v", value, err)
				assert.ErrorContains(t, err, "scaleToZeroRetention must be a duration from 1m to 168h", value)
			}
		}
	})

	t.Run("removing llm-d.ai/managed stops wva serving it; the Deployment stays", func(t *testing.T) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(h.Annotations, llmdv1alpha1.AnnotationManaged)
			_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Update(ctx, h, metav1.UpdateOptions{})
			return err
		}))
		testenv.Eventually(ctx, t, "wva_desired_replicas{variant_name=llama-upstream} NotFound", func() (bool, string) {
			_, err := served()
			return apierrors.IsNotFound(err), fmt_(nil, err)
		})
		// The HPA now fails to read its metric and holds (ScalingActive=False).
		for range 8 {
			require.Equal(t, int32(3), replicas())
			time.Sleep(500 * time.Millisecond)
		}
		// wva never wrote the user's HPA: its spec generation is the one
		// our own two writes (create, annotation removal) left.
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, created.Generation, h.Generation)
		for _, mf := range h.ManagedFields {
			assert.NotContains(t, mf.Manager, "wva", "field manager %s", mf.Manager)
		}
	})
}

// optInFleet is the opt-in tests' fleet: Deployment llama-l4 in prod with
// two Ready pods of model at KV 0.5 (fake vLLM, scraped by a real
// Prometheus), and the percentage analyzer under threshold 0.55 / trigger
// 0.10: spare 0.05 < 0.10, so the engine decides a scale-up from 2 to 3.
func optInFleet(ctx context.Context, t *testing.T, cs kubernetes.Interface, model string) *harness.Prometheus {
	t.Helper()
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	for _, p := range []fakevllm.Pod{{Namespace: "prod", Name: "llama-l4-0", Model: model}, {Namespace: "prod", Name: "llama-l4-1", Model: model}} {
		vllm.Set(p, 0.5, 0)
		vllm.Served(p, 10)
	}
	_, err = cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: configLabels()},
		Data:       map[string]string{"default": "analyzerName: saturation-percentage\nkvCacheThreshold: 0.55\nkvSpareTrigger: 0.10"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	servingVariant(ctx, t, cs, "prod", "llama-l4", 2, []string{"llama-l4-0", "llama-l4-1"})
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the vLLM series", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc`)
		return err == nil && len(s) == 2, fmt_(s, err)
	})
	return prom
}
