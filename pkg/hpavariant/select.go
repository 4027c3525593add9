package hpavariant

import (
	"fmt"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Problem is why an opted-in HPA is not a variant.
type Problem struct {
	HPA     *autoscalingv2.HorizontalPodAutoscaler
	Reason  string
	Message string
}

// Variants converts the opted-in HPAs into variants. A VA wins over an HPA
// for the same scale target (or the same name, which would make
// variant_name ambiguous): that HPA is left out with a Problem, as is one
// with bad annotations.
func Variants(vas []*llmdv1alpha1.VariantAutoscaling, hpas []*autoscalingv2.HorizontalPodAutoscaler) ([]*llmdv1alpha1.VariantAutoscaling, []Problem) {
	byTarget, byName := map[string]string{}, map[string]bool{}
	for _, va := range vas {
		byTarget[va.Namespace+"/"+va.Spec.ScaleTargetRef.Kind+"/"+va.Spec.ScaleTargetRef.Name] = va.Name
		byName[va.Namespace+"/"+va.Name] = true
	}
	var out []*llmdv1alpha1.VariantAutoscaling
	var problems []Problem
	for _, h := range hpas {
		va, err := FromHPA(h)
		switch {
		case err == ErrNotManaged:
			continue
		case err != nil:
			problems = append(problems, Problem{HPA: h, Reason: llmdv1alpha1.ReasonInvalidAnnotations, Message: err.Error() + "; wva does not serve this HPA"})
			continue
		}
		ref := h.Spec.ScaleTargetRef
		if name, ok := byTarget[h.Namespace+"/"+ref.Kind+"/"+ref.Name]; ok {
			problems = append(problems, Problem{HPA: h, Reason: llmdv1alpha1.ReasonConflictingVariantAutoscaling, Message: fmt.Sprintf(
				"VariantAutoscaling %s also scales %s %s and takes precedence; wva does not serve %s=%s for this HPA",
				name, ref.Kind, ref.Name, llmdv1alpha1.MetricLabelVariantName, h.Name)})
			continue
		}
		if byName[h.Namespace+"/"+h.Name] {
			problems = append(problems, Problem{HPA: h, Reason: llmdv1alpha1.ReasonConflictingVariantAutoscaling, Message: fmt.Sprintf(
				"VariantAutoscaling %s has this HPA's name and takes precedence for %s=%s", h.Name, llmdv1alpha1.MetricLabelVariantName, h.Name)})
			continue
		}
		out = append(out, va)
	}
	return out, problems
}

// Warner emits each Problem as a Warning Event on its HPA once: again only
// after the problem went away or changed, not every cycle.
type Warner struct {
	Recorder record.EventRecorder
	mu       sync.Mutex
	reported map[string]string
}

// Report emits the new problems and forgets those no longer present.
func (w *Warner) Report(problems []Problem) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := make(map[string]string, len(problems))
	for _, p := range problems {
		k := string(p.HPA.UID) + "/" + p.HPA.Namespace + "/" + p.HPA.Name
		msg := p.Reason + ": " + p.Message
		next[k] = msg
		if w.reported[k] != msg && w.Recorder != nil {
			w.Recorder.Event(p.HPA, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	}
	w.reported = next
}
