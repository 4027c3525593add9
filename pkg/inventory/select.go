package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Problem is why an opted-in HPA or ScaledObject is not a variant.
type Problem struct {
	Source  OptInSource
	Reason  string
	Message string
}

// OptInVariants converts the opted-in objects into variants. A VA wins over an
// object for the same scale target (or the same name, which would make
// variant_name ambiguous): that object is left out with a Problem, as is
// one with bad annotations. Between two opted-in objects of one target or
// name (an HPA and a ScaledObject), the first in kind/name order wins: one
// target counted twice would double its capacity in the model's group.
func OptInVariants(vas []*llmdv1alpha1.VariantAutoscaling, sources []OptInSource) ([]*llmdv1alpha1.VariantAutoscaling, []Problem) {
	byTarget, byName := map[string]string{}, map[string]bool{}
	for _, va := range vas {
		byTarget[va.Namespace+"/"+va.Spec.ScaleTargetRef.Kind+"/"+va.Spec.ScaleTargetRef.Name] = va.Name
		byName[va.Namespace+"/"+va.Name] = true
	}
	sources = slices.Clone(sources)
	slices.SortFunc(sources, func(a, b OptInSource) int {
		return cmp.Or(cmp.Compare(a.Ref.Namespace, b.Ref.Namespace), cmp.Compare(a.Ref.Kind, b.Ref.Kind), cmp.Compare(a.Ref.Name, b.Ref.Name))
	})
	optedTarget, optedName := map[string]string{}, map[string]string{}
	var out []*llmdv1alpha1.VariantAutoscaling
	var problems []Problem
	for _, s := range sources {
		va, err := s.Variant()
		ns, kind, name := s.Ref.Namespace, s.Ref.Kind, s.Ref.Name
		switch {
		case err == ErrNotManaged:
			continue
		case err != nil:
			problems = append(problems, Problem{Source: s, Reason: llmdv1alpha1.ReasonInvalidAnnotations,
				Message: fmt.Sprintf("%s; wva does not serve this %s", err, kind)})
			continue
		}
		if va, ok := byTarget[ns+"/"+s.Target.Kind+"/"+s.Target.Name]; ok {
			problems = append(problems, Problem{Source: s, Reason: llmdv1alpha1.ReasonConflictingVariantAutoscaling, Message: fmt.Sprintf(
				"VariantAutoscaling %s also scales %s %s and takes precedence; wva does not serve %s=%s for this %s",
				va, s.Target.Kind, s.Target.Name, llmdv1alpha1.MetricLabelVariantName, name, kind)})
			continue
		}
		if byName[ns+"/"+name] {
			problems = append(problems, Problem{Source: s, Reason: llmdv1alpha1.ReasonConflictingVariantAutoscaling, Message: fmt.Sprintf(
				"VariantAutoscaling %s has this %s's name and takes precedence for %s=%s", name, kind, llmdv1alpha1.MetricLabelVariantName, name)})
			continue
		}
		target := ns + "/" + s.Target.Kind + "/" + s.Target.Name
		if other, ok := optedTarget[target]; ok {
			problems = append(problems, Problem{Source: s, Reason: llmdv1alpha1.ReasonConflictingOptIn, Message: fmt.Sprintf(
				"%s also opts in %s %s and takes precedence; wva does not serve %s=%s for this %s",
				other, s.Target.Kind, s.Target.Name, llmdv1alpha1.MetricLabelVariantName, name, kind)})
			continue
		}
		if other, ok := optedName[ns+"/"+name]; ok {
			problems = append(problems, Problem{Source: s, Reason: llmdv1alpha1.ReasonConflictingOptIn, Message: fmt.Sprintf(
				"%s has this %s's name and takes precedence for %s=%s", other, kind, llmdv1alpha1.MetricLabelVariantName, name)})
			continue
		}
		optedTarget[target] = kind + " " + name
		optedName[ns+"/"+name] = kind + " " + name
		out = append(out, va)
	}
	return out, problems
}

// Warner emits each Problem as a Warning Event on its object and a log line
// once: again only after the problem went away or changed, not every cycle.
type Warner struct {
	Recorder record.EventRecorder
	// Left, when set, counts the objects left out by reason (NewLeftGauge).
	Left     *prometheus.GaugeVec
	mu       sync.Mutex
	reported map[string]string
}

// problemReasons are the reasons Left always has a series for, so an alert
// on it sees 0 before the first problem.
var problemReasons = []string{llmdv1alpha1.ReasonInvalidAnnotations, llmdv1alpha1.ReasonConflictingVariantAutoscaling, llmdv1alpha1.ReasonConflictingOptIn}

// NewLeftGauge registers wva_optin_left_out{reason}.
func NewLeftGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_optin_left_out",
		Help: "HPAs and ScaledObjects opted in by annotations that wva does not serve, by reason (a VA or another opted-in object scales the same target or has the name, or bad annotations)."},
		[]string{"reason"})
	for _, r := range problemReasons {
		g.WithLabelValues(r)
	}
	reg.MustRegister(g)
	return g
}

// Report emits the new problems and forgets those no longer present.
func (w *Warner) Report(problems []Problem) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := make(map[string]string, len(problems))
	counts := map[string]int{}
	for _, p := range problems {
		ref := p.Source.Ref
		k := string(ref.UID) + "/" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name
		msg := p.Reason + ": " + p.Message
		next[k] = msg
		counts[p.Reason]++
		if w.reported[k] == msg {
			continue
		}
		klog.InfoS("opted-in object not served", "kind", ref.Kind, "object", klog.KRef(ref.Namespace, ref.Name), "reason", p.Reason, "message", p.Message)
		if w.Recorder != nil {
			w.Recorder.Event(&ref, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	}
	w.reported = next
	if w.Left != nil {
		for _, r := range problemReasons {
			w.Left.WithLabelValues(r).Set(float64(counts[r]))
		}
	}
}
