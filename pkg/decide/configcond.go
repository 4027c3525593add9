package decide

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// maxConditionMessage keeps many broken entries well inside the API's
// 32768-byte limit on a condition message.
const maxConditionMessage = 4096

// SetConfigCondition sets ConfigValid from the rejected ConfigMap entries
// meant for the VA's model, one line each (ConfigMap, key, error): the
// operator sees on the VA, not only in an Event on the ConfigMap, that its
// configuration is not what was written.
func SetConfigCondition(st *llmdv1alpha1.VariantAutoscalingStatus, va *llmdv1alpha1.VariantAutoscaling,
	invalid []string, now time.Time) {
	c := metav1.Condition{Type: llmdv1alpha1.ConditionTypeConfigValid, Status: metav1.ConditionTrue,
		Reason: llmdv1alpha1.ReasonConfigApplied, Message: "every wva ConfigMap entry for this model is valid",
		ObservedGeneration: va.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if len(invalid) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, llmdv1alpha1.ReasonInvalidConfig
		c.Message = strings.Join(invalid, "; ") + "; the last valid version of each applies (built-in defaults where there is none)"
		if len(c.Message) > maxConditionMessage {
			c.Message = c.Message[:maxConditionMessage-3] + "..."
		}
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
