package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func va(ns, name, model string, cost string, min, max int32) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			ModelID:        model, MinReplicas: ptr(min), MaxReplicas: max, VariantCost: cost,
		},
	}
}

func resolved(replicas int32, ready ...string) Target {
	return Target{Resolved: true, SpecReplicas: replicas, ReadyPods: ready}
}

func collectedPods(ns string, kv float64, names ...string) map[collector.PodKey]collector.PodMetrics {
	out := map[collector.PodKey]collector.PodMetrics{}
	for _, n := range names {
		out[collector.PodKey{Namespace: ns, Pod: n}] = collector.PodMetrics{KvCacheUsage: kv, HasKvCacheUsage: true, HasQueueLength: true}
	}
	return out
}

func defaults(model, ns string) params.Resolved { return config.NewStore().Resolve(model, ns) }

func pipelineInput(m MetricsState) GroupInput {
	return GroupInput{Metrics: m, Group: decision.Group{ModelID: "m", Namespace: "prod"}}
}

func resultWith(replicas int32, reason string) GroupResult {
	return GroupResult{Analyzer: "saturation-percentage", Targets: []decision.Target{{Variant: "a", Replicas: replicas, Reason: reason, Action: decision.ActionNone, Rule: decision.RuleSteady}}}
}

// percentageStore selects the percentage analyzer in the saturation
// ConfigMap's default entry (plus extra lines): the replica counts these
// engine tests expect are its decisions, not the built-in slo-planner's.
func percentageStore(t *testing.T, extra string) *config.Store {
	t.Helper()
	store := config.NewStore()
	require.NoError(t, store.Apply(config.SaturationConfigMapName,
		map[string]string{config.DefaultKey: "analyzerName: " + params.AnalyzerSaturationPercentage + "\n" + extra}))
	return store
}

func scaleToZeroOn(model, ns string) params.Resolved {
	r := config.NewStore().Resolve(model, ns)
	r.ScaleToZero = params.ScaleToZero{Enabled: true, RetentionPeriod: params.Duration(10 * time.Minute)}
	return r
}

// wokenVA is a VA decided to 0 fifteen minutes ago, annotated by the fast
// path.
func wokenVA(annotation string) *llmdv1alpha1.VariantAutoscaling {
	v := va("dev", "granite", "granite", "5", 0, 4)
	if annotation != "" {
		v.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: annotation}
	}
	v.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, LastUpdate: metav1.NewTime(t0.Add(-15 * time.Minute)),
		LastRunTime: metav1.NewTime(t0.Add(-30 * time.Second))}
	return v
}
