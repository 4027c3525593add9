package decide

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
)

// NextStatus is the status a VA should have after a cycle decided target for
// it. It starts from the VA's current status, so fields other owners write
// (actuation, by the controller) are kept.
func NextStatus(va *llmdv1alpha1.VariantAutoscaling, plan Plan, res GroupResult, target decision.Target,
	tgt Target, metricsErr error, now time.Time) llmdv1alpha1.VariantAutoscalingStatus {
	st := *va.Status.DeepCopy()
	stamp := metav1.NewTime(now.Truncate(time.Second))
	alloc := &st.DesiredOptimizedAlloc
	// lastUpdate moves only when the replica count changes: reasons carry
	// live numbers, and the retention rules measure from real changes.
	if alloc.NumReplicas != target.Replicas || alloc.LastUpdate.IsZero() {
		alloc.LastUpdate = stamp
	}
	alloc.NumReplicas = target.Replicas
	alloc.Reason = target.Reason
	alloc.LastRunTime = stamp
	st.CurrentReplicas = tgt.SpecReplicas

	set := func(condType string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: msg, ObservedGeneration: va.Generation,
			LastTransitionTime: stamp,
		})
	}
	set(llmdv1alpha1.ConditionTypeTargetResolved, true, llmdv1alpha1.ReasonTargetFound,
		fmt.Sprintf("%s %s has %d replicas (%d ready, %d pending)", va.Spec.ScaleTargetRef.Kind, va.Spec.ScaleTargetRef.Name,
			tgt.SpecReplicas, len(tgt.ReadyPods), tgt.PendingPods))

	reporting := 0
	for _, r := range plan.Input.Group.Replicas {
		if r.Variant == va.Name {
			reporting++
		}
	}
	switch {
	case plan.Input.RequestCountMissing():
		set(llmdv1alpha1.ConditionTypeMetricsAvailable, false, llmdv1alpha1.ReasonRequestCountMissing,
			fmt.Sprintf("%d of %d replicas report vLLM metrics, but vllm:request_success_total has no series for model %q: "+
				"a scraping fault, not idleness; replicas held, no scale to zero", reporting, tgt.SpecReplicas, plan.Key.ModelID))
	case plan.Input.Metrics == MetricsAvailable:
		set(llmdv1alpha1.ConditionTypeMetricsAvailable, true, llmdv1alpha1.ReasonMetricsFound,
			fmt.Sprintf("%d of %d replicas reporting vLLM metrics", reporting, tgt.SpecReplicas))
	case plan.Input.Metrics == MetricsMissing:
		set(llmdv1alpha1.ConditionTypeMetricsAvailable, false, llmdv1alpha1.ReasonMetricsMissingWithReadyPods,
			fmt.Sprintf("variant %s has %d Ready pods (model %q: %d) but none reports vLLM metrics in Prometheus: "+
				"a scraping fault (PodMonitor, relabeling, model_name label), not idleness; replicas held, no scale to zero",
				va.Name, len(tgt.ReadyPods), plan.Key.ModelID, plan.ReadyPods))
	case plan.Input.Metrics == MetricsAbsent:
		set(llmdv1alpha1.ConditionTypeMetricsAvailable, false, llmdv1alpha1.ReasonMetricsMissing,
			fmt.Sprintf("no replica of model %q reports vLLM metrics in Prometheus", plan.Key.ModelID))
	default:
		msg := "Prometheus unreachable"
		if metricsErr != nil {
			msg = metricsErr.Error()
		}
		set(llmdv1alpha1.ConditionTypeMetricsAvailable, false, llmdv1alpha1.ReasonPrometheusError, msg+"; previous decision held")
	}
	if res.Err != nil {
		set(llmdv1alpha1.ConditionTypeOptimizationReady, false, llmdv1alpha1.ReasonOptimizationFailed, res.Err.Error())
	} else {
		set(llmdv1alpha1.ConditionTypeOptimizationReady, true, llmdv1alpha1.ReasonOptimizationSucceeded,
			fmt.Sprintf("%s: %s (%s)", res.Analyzer, target.Rule, target.Action))
	}
	return st
}

// UnresolvedStatus marks a VA whose target could not be resolved; its last
// decision stays in force (the HPA holds).
func UnresolvedStatus(va *llmdv1alpha1.VariantAutoscaling, tgt Target, now time.Time) llmdv1alpha1.VariantAutoscalingStatus {
	st := *va.Status.DeepCopy()
	reason := tgt.Reason
	if reason == "" {
		reason = llmdv1alpha1.ReasonTargetNotFound
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: llmdv1alpha1.ConditionTypeTargetResolved, Status: metav1.ConditionFalse, Reason: reason,
		Message: tgt.Message, ObservedGeneration: va.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	})
	return st
}
