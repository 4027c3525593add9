package decide

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/pkg/analyzer"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// SetStuckCondition shows on the VA that its variant is stuck in
// transition (the analyzer's bound passed): TransitionStuck=True with the
// analyzer's description. It returns the message when this cycle is the
// onset (the condition was not True before), for a single Event. A variant
// no longer stuck gets False only if it had the condition, so VAs that
// were never stuck carry no extra condition. Without an analysis (metrics
// not available this cycle) nothing is known and the condition is kept.
func SetStuckCondition(st *llmdv1alpha1.VariantAutoscalingStatus, va *llmdv1alpha1.VariantAutoscaling,
	res GroupResult, now time.Time) (onset string) {
	a, ok := res.Analysis.(analyzer.StuckReporter)
	if !ok {
		return ""
	}
	was := meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck)
	c := metav1.Condition{Type: llmdv1alpha1.ConditionTypeTransitionStuck, ObservedGeneration: va.Generation,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if msg, stuck := a.StuckVariants()[va.Name]; stuck {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, llmdv1alpha1.ReasonStuckTransition, msg
		meta.SetStatusCondition(&st.Conditions, c)
		if was {
			return ""
		}
		return c.Message
	}
	if meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck) != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, llmdv1alpha1.ReasonNoStuckTransition, "the variant is not stuck in transition"
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return ""
}
