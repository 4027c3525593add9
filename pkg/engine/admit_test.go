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

// quotaBudget adds namespace GPU quotas to fixedBudget.
type quotaBudget struct {
	fixedBudget
	quotas []budget.Quota
}

func (q *quotaBudget) ReadQuotas() ([]budget.Quota, error) { return q.quotas, nil }

// A namespace's GPU quota cuts a scale-up its pool has room for: the
// condition, the reason and the Event name the quota; another namespace's
// variant in the same pool is not limited by it.
func TestRunOnceNamespaceQuota(t *testing.T) {
	prod := va("prod", "h100", "llama", "5", 1, 8)
	prod.Spec.AcceleratorName, prod.Spec.GPUsPerReplica = "H100", ptr.To(int32(2))
	dev := va("dev", "h100-dev", "llama", "5", 1, 8)
	dev.Spec.AcceleratorName, dev.Spec.GPUsPerReplica = "H100", ptr.To(int32(2))
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	rec := record.NewFakeRecorder(20)
	// Pool H100: 16 GPUs free. prod's quota: 5 GPUs, its variant holds 2 x 2
	// by spec although the quota's status has seen only 2 of them.
	b := &quotaBudget{fixedBudget: fixedBudget{free: decision.Free{"H100": 16}},
		quotas: []budget.Quota{{Namespace: "prod", Name: "gpus", Hard: 5, Used: 2}}}
	ps := pods("prod", 0.95, "p1", "p2")
	for k, m := range pods("dev", 0.95, "d1", "d2") {
		ps[k] = m
	}
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: prod, Target: resolved(2, "p1", "p2")}, {VA: dev, Target: resolved(2, "d1", "d2")}}},
		Metrics: &fakeMetrics{res: collector.Result{Pods: ps}},
		Status:  writer, Config: percentageStore(t, ""), Pipeline: decide.Default(), Budget: b,
		Recorder: rec, Observe: NewMetrics(prometheus.NewRegistry()), Clock: clocktesting.NewFakeClock(t0)}
	_, err := e.RunOnce(context.Background())
	require.NoError(t, err)

	const quotaCut = "GPU quota: prod/h100 +1 (2 GPUs each) cut to +0: ResourceQuota prod/gpus (hard 5 GPUs, used 4) has 1 GPUs left"
	p := writer.writes["h100"]
	assert.Equal(t, int32(2), p.DesiredOptimizedAlloc.NumReplicas, p.DesiredOptimizedAlloc.Reason)
	assert.Contains(t, p.DesiredOptimizedAlloc.Reason, quotaCut)
	cond := meta.FindStatusCondition(p.Conditions, llmdv1alpha1.ConditionTypeGPUBudgeted)
	require.NotNil(t, cond)
	assert.Contains(t, cond.Message, "last scale-up: "+quotaCut)
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	assert.Contains(t, strings.Join(events, "\n"), "Warning "+ReasonGPUBudgetExceeded+" "+quotaCut)
	d := writer.writes["h100-dev"]
	assert.Equal(t, int32(3), d.DesiredOptimizedAlloc.NumReplicas, "dev has no quota: "+d.DesiredOptimizedAlloc.Reason)
}
