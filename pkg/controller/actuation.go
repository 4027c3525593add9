package controller

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// defaultTolerance is the HPA's built-in tolerance band when the cluster
// does not let wva set it (--horizontal-pod-autoscaler-tolerance default).
const defaultTolerance = 0.1

// DirectScale is a replica count the controller sets on the scale target
// itself, because the HPA would not.
type DirectScale struct {
	Replicas int32
	Reason   string
}

// PlanDirectScale decides whether the controller must scale the target
// itself. Pure; now is an input. It acts only on a fresh decision of record:
//   - to 0, when the decision is 0, the VA allows it, and the HPA cannot
//     (no HPAScaleToZero); never while Prometheus is unreachable, nor on a
//     decision made before the fast path's last wake (it would undo the
//     wake and restart the model load before the adapter's next cycle);
//   - from 0, when the decision is >= 1: an HPA whose target someone else
//     scaled to 0 is disabled until the target has a replica;
//   - inside the HPA's tolerance band (|desired/current - 1| <= 0.1) when
//     the cluster cannot set tolerance to 0, so 20 -> 21 still happens.
//
// The planned count is clamped to the VA's bounds as they are now: the
// decision may predate a lowered maxReplicas (or a raised minReplicas), and
// the engine re-applies it to a fresh copy after a write conflict.
func PlanDirectScale(va *llmdv1alpha1.VariantAutoscaling, caps Capabilities, current int32, now time.Time, staleAfter time.Duration) (DirectScale, bool) {
	plan, ok := planDirectScale(va, caps, current, now, staleAfter)
	if !ok {
		return DirectScale{}, false
	}
	bounded := clampToBounds(va, plan.Replicas)
	if bounded == current {
		return DirectScale{}, false
	}
	if bounded != plan.Replicas {
		plan.Reason += fmt.Sprintf("; %d clamped to the VA's current bounds [%d, %d]",
			plan.Replicas, va.MinReplicasOrDefault(), va.MaxReplicasOrDefault())
		plan.Replicas = bounded
	}
	return plan, true
}

// clampToBounds bounds n to [minReplicas, maxReplicas]; max wins should the
// two cross, so the target never exceeds maxReplicas. A planned 0 passes
// only where minReplicas is 0 (planDirectScale plans 0 only then).
func clampToBounds(va *llmdv1alpha1.VariantAutoscaling, n int32) int32 {
	return min(max(n, va.MinReplicasOrDefault()), va.MaxReplicasOrDefault())
}

// planDirectScale is PlanDirectScale before clamping.
func planDirectScale(va *llmdv1alpha1.VariantAutoscaling, caps Capabilities, current int32, now time.Time, staleAfter time.Duration) (DirectScale, bool) {
	alloc := va.Status.DesiredOptimizedAlloc
	if alloc.LastRunTime.IsZero() || now.Sub(alloc.LastRunTime.Time) > staleAfter {
		return DirectScale{}, false
	}
	desired := alloc.NumReplicas
	switch {
	case desired == current:
		return DirectScale{}, false
	case desired == 0:
		if caps.ScaleToZero || va.MinReplicasOrDefault() > 0 || metricsUnreachable(va) || va.DecidedBeforeWake() {
			return DirectScale{}, false
		}
		return DirectScale{Replicas: 0, Reason: fmt.Sprintf("decision of record is 0 (%s); the HPA cannot scale below 1 here", alloc.Reason)}, true
	case current == 0:
		return DirectScale{Replicas: desired, Reason: fmt.Sprintf("decision of record is %d and the target is at 0, where an HPA is disabled", desired)}, true
	case !caps.Tolerance && math.Abs(float64(desired)/float64(current)-1) <= defaultTolerance:
		return DirectScale{Replicas: desired, Reason: fmt.Sprintf("%d -> %d is inside the HPA's %.0f%% tolerance band, which this cluster cannot set to 0",
			current, desired, defaultTolerance*100)}, true
	}
	return DirectScale{}, false
}

// PlanDirectScaleFor is PlanDirectScale for an output mode: with KEDA
// ScaledObjects KEDA owns 0 <-> 1, so only steps inside the tolerance band
// of KEDA's HPA (which wva cannot set to 0 there) are left to wva.
func PlanDirectScaleFor(output Output, va *llmdv1alpha1.VariantAutoscaling, caps Capabilities, current int32, now time.Time,
	staleAfter time.Duration) (DirectScale, bool) {
	plan, ok := PlanDirectScale(va, caps, current, now, staleAfter)
	if ok && output == OutputScaledObject && (plan.Replicas == 0 || current == 0) {
		return DirectScale{}, false
	}
	return plan, ok
}

func metricsUnreachable(va *llmdv1alpha1.VariantAutoscaling) bool {
	c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == llmdv1alpha1.ReasonPrometheusError
}
