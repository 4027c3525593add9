package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

// Two saturated groups, both wanting a third replica: h100 is in a full
// pool, l4 in none. Each gets its GPUBudgeted condition, the Warning Events
// come once (not every cycle), the unbudgeted one has its gauge, and
// --unbudgeted-variants=refuse holds it too.
func TestRunOnceAdmissionConditionsEventsMetric(t *testing.T) {
	for _, policy := range []budget.Unbudgeted{"", budget.UnbudgetedRefuse} {
		t.Run(string(policy), func(t *testing.T) {
			h100 := va("prod", "h100", "llama", "5", 1, 8)
			h100.Spec.AcceleratorName, h100.Spec.GPUsPerReplica = "H100", ptr.To(int32(2))
			l4 := va("prod", "l4", "mistral", "5", 1, 8)
			l4.Spec.AcceleratorName = "L4"
			writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
			rec := record.NewFakeRecorder(20)
			reg := prometheus.NewRegistry()
			e := &Engine{Views: &fakeViews{views: []decide.View{{VA: h100, Target: resolved(2, "h1", "h2")}, {VA: l4, Target: resolved(2, "l1", "l2")}}},
				Metrics: &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.95, "h1", "h2", "l1", "l2")}},
				Status:  writer, Config: percentageStore(t, ""), Pipeline: decide.Default(), Budget: &fixedBudget{free: decision.Free{"H100": 0}},
				Unbudgeted: policy, Recorder: rec, Observe: NewMetrics(reg), Clock: clocktesting.NewFakeClock(t0)}

			for range 2 {
				_, err := e.RunOnce(context.Background())
				require.NoError(t, err)
			}

			h := writer.writes["h100"]
			assert.Equal(t, int32(2), h.DesiredOptimizedAlloc.NumReplicas, h.DesiredOptimizedAlloc.Reason)
			cond := meta.FindStatusCondition(h.Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted)
			require.NotNil(t, cond)
			assert.Equal(t, metav1.ConditionTrue, cond.Status)
			assert.Equal(t, llmdv1alpha1.ReasonBudgeted, cond.Reason)
			assert.Contains(t, cond.Message, "pool H100 (budget 4 GPUs, unlimited GPU memory); last scale-up: GPU budget: prod/h100 +1 (2 GPUs each) cut to +0")

			l := writer.writes["l4"]
			cond = meta.FindStatusCondition(l.Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted)
			require.NotNil(t, cond)
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, llmdv1alpha1.ReasonNoPool, cond.Reason)
			wantL4 := int32(3)
			if policy == budget.UnbudgetedRefuse {
				wantL4 = 2
				assert.Contains(t, l.DesiredOptimizedAlloc.Reason, "GPU budget: prod/l4 +1 refused (--unbudgeted-variants=refuse): no GPU budget pool applies")
			}
			assert.Equal(t, wantL4, l.DesiredOptimizedAlloc.NumReplicas, l.DesiredOptimizedAlloc.Reason)

			var warnings []string
			for len(rec.Events) > 0 {
				if ev := <-rec.Events; strings.HasPrefix(ev, "Warning") {
					warnings = append(warnings, ev)
				}
			}
			require.Len(t, warnings, 2, "one per variant over two cycles: %q", warnings)
			assert.Contains(t, strings.Join(warnings, "\n"), "Warning "+ReasonGPUBudgetExceeded+" GPU budget: prod/h100 +1")
			// A refusal's Event says why it is unbudgeted: one Event, not two.
			wantL4Event := "Warning NoPool no GPU budget pool applies"
			if policy == budget.UnbudgetedRefuse {
				wantL4Event = "Warning " + ReasonGPUBudgetExceeded + " GPU budget: prod/l4 +1 refused"
			}
			assert.Contains(t, strings.Join(warnings, "\n"), wantL4Event)

			assert.Equal(t, 1, testutil.CollectAndCount(e.Observe.Unbudgeted))
			assert.Equal(t, 1.0, testutil.ToFloat64(e.Observe.Unbudgeted.WithLabelValues("prod", "l4", llmdv1alpha1.ReasonNoPool)))
		})
	}
}

// Without a budget source nothing changes: no condition, no gauge.
func TestRunOnceNoBudgetNoCondition(t *testing.T) {
	v := va("prod", "l4", "llama", "5", 1, 8)
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: v, Target: resolved(2, "p1", "p2")}}},
		Metrics: &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.95, "p1", "p2")}},
		Status:  writer, Config: percentageStore(t, ""), Pipeline: decide.Default(), Observe: NewMetrics(prometheus.NewRegistry()),
		Clock: clocktesting.NewFakeClock(t0)}
	_, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int32(3), writer.writes["l4"].DesiredOptimizedAlloc.NumReplicas)
	assert.Nil(t, meta.FindStatusCondition(writer.writes["l4"].Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted))
	assert.Equal(t, 0, testutil.CollectAndCount(e.Observe.Unbudgeted))
}
