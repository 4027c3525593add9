package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
)

// engineConditions are the condition types the engine owns; others (the
// controller's) are left alone.
var engineConditions = []string{
	llmdv1alpha1.ConditionTypeTargetResolved,
	llmdv1alpha1.ConditionTypeMetricsAvailable,
	llmdv1alpha1.ConditionTypeOptimizationReady,
	llmdv1alpha1.ConditionTypeConfigValid,
	llmdv1alpha1.ConditionTypeTransitionStuck,
}

// ClientStatusWriter writes VA status through the API server.
type ClientStatusWriter struct {
	Client versioned.Interface
}

// WriteStatus updates the engine-owned status fields. On a conflict it
// re-reads the VA and applies the same fields to the fresh copy, so writes by
// other owners (the controller's actuation) are never lost and neither is
// the decision.
func (w ClientStatusWriter) WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) error {
	vas := w.Client.LlmdV1alpha1().VariantAutoscalings(va.Namespace)
	current := va.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next := current.DeepCopy()
		MergeEngineStatus(&next.Status, status)
		_, err := vas.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: "wva-adapter"})
		if err == nil {
			return nil
		}
		latest, getErr := vas.Get(ctx, va.Name, metav1.GetOptions{})
		if getErr != nil {
			return err
		}
		current = latest
		return err
	})
}

// MergeEngineStatus copies the engine-owned fields of from into into.
func MergeEngineStatus(into *llmdv1alpha1.VariantAutoscalingStatus, from llmdv1alpha1.VariantAutoscalingStatus) {
	into.DesiredOptimizedAlloc = from.DesiredOptimizedAlloc
	into.CurrentReplicas = from.CurrentReplicas
	for _, t := range engineConditions {
		if c := meta.FindStatusCondition(from.Conditions, t); c != nil {
			meta.SetStatusCondition(&into.Conditions, *c)
		}
	}
}
