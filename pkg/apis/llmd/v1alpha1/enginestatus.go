package v1alpha1

import "k8s.io/apimachinery/pkg/api/meta"

// EngineConditionTypes are the condition types the engine owns; others (the
// controller's) are left alone.
var EngineConditionTypes = []string{
	ConditionTypeTargetResolved,
	ConditionTypeMetricsAvailable,
	ConditionTypeOptimizationReady,
	ConditionTypeConfigValid,
	ConditionTypeTransitionStuck,
	ConditionTypeInferencePoolResolved,
	ConditionTypeGPUBudgeted,
}

// MergeEngineStatus copies the engine-owned fields of from into into.
func MergeEngineStatus(into *VariantAutoscalingStatus, from VariantAutoscalingStatus) {
	into.DesiredOptimizedAlloc = from.DesiredOptimizedAlloc
	into.CurrentReplicas = from.CurrentReplicas
	for _, t := range EngineConditionTypes {
		if c := meta.FindStatusCondition(from.Conditions, t); c != nil {
			meta.SetStatusCondition(&into.Conditions, *c)
		}
	}
}
