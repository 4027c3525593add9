package engine

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

// Admitted is a variant's standing with the GPU budget this cycle.
type Admitted struct {
	budget.Coverage
	// Cut is why its scale-up was cut ("" when none was).
	Cut string
}

// budgetRead is one cycle's read of the GPU budget.
type budgetRead struct {
	variants map[string]budget.Variant
	usage    map[string]budget.Usage
	ledger   *budget.Ledger
}

// readBudget reads the pools and what holds them for the views; ok is
// false when there is no budget source or the read failed.
func (e *Engine) readBudget(views []decide.View) (budgetRead, bool) {
	if e.Budget == nil {
		return budgetRead{}, false
	}
	ws := Workloads(views)
	vs, usage, err := e.Budget.LimiterUsage(ws)
	if err != nil {
		// Informer caches do not fail in practice; deciding unlimited
		// beats holding every group for a budget read.
		klog.ErrorS(err, "reading the GPU budget; scale-ups are not admitted against it this cycle")
		return budgetRead{}, false
	}
	models := make(map[string]string, len(ws))
	byKey := make(map[string]budget.Variant, len(vs))
	for i, v := range vs {
		models[v.Key] = ws[i].VA.Spec.ModelID
		byKey[v.Key] = v
	}
	policy := e.Unbudgeted
	if policy == "" {
		policy = budget.UnbudgetedUnlimited
	}
	ledger := budget.NewLedger(usage, policy, models)
	if qs, ok := e.Budget.(budget.QuotaSource); ok {
		quotas, err := qs.ReadQuotas()
		if err != nil {
			klog.ErrorS(err, "reading the namespaces' GPU quotas; scale-ups are not admitted against them this cycle")
		}
		ledger.WithQuotas(budget.EffectiveQuotas(quotas, vs))
	}
	return budgetRead{variants: byKey, usage: usage, ledger: ledger}, true
}

// admit cuts each scale-up of the results to what its pool has left (see
// budget.Ledger.Admit), groups in plan order, and returns every budgeted
// view's standing keyed by "namespace/name".
func admit(b budgetRead, plans []decide.Plan, results []decide.GroupResult) map[string]Admitted {
	out := make(map[string]Admitted, len(b.variants))
	for key, v := range b.variants {
		out[key] = Admitted{Coverage: budget.Cover(v, b.usage)}
	}
	for i, p := range plans {
		for j, va := range p.VAs {
			key := va.Namespace + "/" + va.Name
			v, ok := b.variants[key]
			if !ok || j >= len(results[i].Targets) {
				continue
			}
			t := &results[i].Targets[j]
			current := int32(v.Replicas)
			a := b.ledger.Admit(v, current, t.Replicas)
			if !a.Cut() {
				continue
			}
			t.Reason = a.Reason + "; wanted " + t.Reason
			t.Replicas, t.Action, t.Rule = a.Replicas, decision.ActionFor(current, a.Replicas), decision.RuleGPULimited
			st := out[key]
			st.Cut = a.Reason
			out[key] = st
		}
	}
	return out
}

// unbudgetedSeries are the wva_variant_unbudgeted series of the standings.
func unbudgetedSeries(st map[string]Admitted) [][3]string {
	var out [][3]string
	for key, a := range st {
		if a.Budgeted() {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, [3]string{ns, name, a.Reason})
	}
	return out
}

// setBudgetCondition writes GPUBudgeted and returns the Warning Event to
// record (reason, message; "" for none): one when the variant becomes
// unbudgeted or changes reason, and one per new cut message, so a held
// refusal is not repeated every cycle.
func setBudgetCondition(status *llmdv1alpha1.VariantAutoscalingStatus, va *llmdv1alpha1.VariantAutoscaling, a Admitted, now time.Time) (string, string) {
	prev := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted)
	cond := metav1.Condition{Type: llmdv1alpha1.ConditionTypeGPUBudgeted, Status: metav1.ConditionTrue, Reason: a.Reason,
		Message: a.Message, ObservedGeneration: va.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if !a.Budgeted() {
		cond.Status = metav1.ConditionFalse
	}
	if a.Cut != "" {
		cond.Message += "; last scale-up: " + a.Cut
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	switch {
	case a.Cut != "" && (prev == nil || prev.Message != cond.Message):
		return ReasonGPUBudgetExceeded, a.Cut
	case !a.Budgeted() && (prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != a.Reason):
		return a.Reason, a.Message
	}
	return "", ""
}

// ReasonGPUBudgetExceeded is the Event reason of a scale-up the GPU budget
// cut.
const ReasonGPUBudgetExceeded = "GPUBudgetExceeded"

func (e *Engine) recordBudget(va *llmdv1alpha1.VariantAutoscaling, reason, msg string) {
	if e.Recorder != nil && reason != "" {
		e.Recorder.Event(va, corev1.EventTypeWarning, reason, msg)
	}
}
