package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decide"
)

// on makes v scale kind/name.
func on(v *llmdv1alpha1.VariantAutoscaling, kind, name string) *llmdv1alpha1.VariantAutoscaling {
	v.Spec.ScaleTargetRef.Kind, v.Spec.ScaleTargetRef.Name = kind, name
	return v
}

// fromHPA is the in-memory VA the inventory builds for an annotated HPA.
func fromHPA(v *llmdv1alpha1.VariantAutoscaling) *llmdv1alpha1.VariantAutoscaling {
	v.Annotations = map[string]string{llmdv1alpha1.AnnotationFromHPA: v.Name}
	return v
}

func TestSharedTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		vas  []*llmdv1alpha1.VariantAutoscaling
		want map[TargetKey][]string
	}{
		{name: "one VA per target", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "a"),
			on(va("prod", "b", "llama", "5", 1, 4), "Deployment", "b"),
		}, want: map[TargetKey][]string{}},
		{name: "two VAs on one Deployment", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "b", "llama", "5", 1, 4), "Deployment", "llama"),
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "llama"),
		}, want: map[TargetKey][]string{{"prod", "Deployment", "llama"}: {"VariantAutoscaling a", "VariantAutoscaling b"}}},
		{name: "same name in two namespaces is two targets", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "llama"),
			on(va("dev", "a", "llama", "5", 1, 4), "Deployment", "llama"),
		}, want: map[TargetKey][]string{}},
		{name: "same name, different kinds", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "llama"),
			on(va("prod", "b", "llama", "5", 1, 4), "StatefulSet", "llama"),
		}, want: map[TargetKey][]string{}},
		{name: "VA and annotated HPA on one Deployment", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "llama"),
			on(fromHPA(va("prod", "llama-hpa", "llama", "5", 1, 4)), "Deployment", "llama"),
		}, want: map[TargetKey][]string{{"prod", "Deployment", "llama"}: {"HorizontalPodAutoscaler llama-hpa", "VariantAutoscaling a"}}},
		{name: "three claimants, one other target", vas: []*llmdv1alpha1.VariantAutoscaling{
			on(va("prod", "a", "llama", "5", 1, 4), "Deployment", "llama"),
			on(va("prod", "b", "llama", "5", 1, 4), "Deployment", "llama"),
			on(va("prod", "c", "granite", "5", 1, 4), "Deployment", "llama"),
			on(va("prod", "d", "llama", "5", 1, 4), "Deployment", "d"),
		}, want: map[TargetKey][]string{{"prod", "Deployment", "llama"}: {"VariantAutoscaling a", "VariantAutoscaling b", "VariantAutoscaling c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SharedTargets(tc.vas))
		})
	}
}

// TestRunOnceSharedTargetDecidesForNeither: two VAs of one model on one
// Deployment get TargetResolved=False/SharedScaleTarget naming each other
// and one Warning Event each, keep their last decision, and do not count
// the shared pods in the group; the model's third variant is decided.
func TestRunOnceSharedTargetDecidesForNeither(t *testing.T) {
	prior := llmdv1alpha1.OptimizedAlloc{NumReplicas: 2, Reason: "earlier", LastRunTime: metav1.NewTime(t0.Add(-time.Minute)),
		LastUpdate: metav1.NewTime(t0.Add(-time.Hour))}
	a, b := on(va("prod", "a", "llama", "5", 1, 8), "Deployment", "llama"), on(va("prod", "b", "llama", "5", 1, 8), "Deployment", "llama")
	a.Status.DesiredOptimizedAlloc, b.Status.DesiredOptimizedAlloc = prior, prior
	c := va("prod", "c", "llama", "15", 1, 8)
	views := &fakeViews{views: []decide.View{
		{VA: a, Target: resolved(2, "p1", "p2")}, {VA: b, Target: resolved(2, "p1", "p2")}, {VA: c, Target: resolved(1, "c1")},
	}}
	// The shared pods are busy: counted twice, they would scale the model up.
	res := collector.Result{Pods: pods("prod", 0.9, "p1", "p2"),
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "prod", Model: "llama"}: 10}}}
	for k, v := range pods("prod", 0.3, "c1") {
		res.Pods[k] = v
	}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	rec := record.NewFakeRecorder(20)
	clk := clocktesting.NewFakeClock(t0)
	e := &Engine{Views: views, Metrics: &fakeMetrics{res: res}, Status: writer, Config: percentageStore(t, ""), Pipeline: decide.Default(),
		Recorder: rec, Observe: NewMetrics(prometheus.NewRegistry()), Clock: clk, Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}

	cyc, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, cyc.Variants, "only c is decided")
	require.Len(t, cyc.Results, 1)
	require.Len(t, cyc.Results[0].Targets, 1, "the group has c alone")
	assert.Equal(t, "c", cyc.Results[0].Targets[0].Variant)
	for name, other := range map[string]string{"a": "VariantAutoscaling b", "b": "VariantAutoscaling a"} {
		st, ok := writer.writes[name]
		require.True(t, ok, "%s: status written", name)
		cond := meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeTargetResolved)
		require.NotNil(t, cond, name)
		assert.Equal(t, metav1.ConditionFalse, cond.Status, name)
		assert.Equal(t, llmdv1alpha1.ReasonSharedScaleTarget, cond.Reason, name)
		assert.Contains(t, cond.Message, "Deployment llama is also scaled by "+other, name)
		assert.Equal(t, prior, st.DesiredOptimizedAlloc, "%s: no new decision", name)
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(e.Observe.SharedTargetVariants))
	assert.Equal(t, 1, testutil.CollectAndCount(e.Observe.DesiredReplicas), "c's gauge only, none for a held variant")
	events := drain(rec)
	assert.Equal(t, 2, countPrefix(events, "Warning SharedScaleTarget "), "%v", events)

	// Next cycle: same conflict, nothing new to write or to say.
	clk.Step(30 * time.Second)
	delete(writer.writes, "a")
	delete(writer.writes, "b")
	_, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, writer.writes, "a")
	assert.NotContains(t, writer.writes, "b")
	assert.Zero(t, countPrefix(drain(rec), "Warning SharedScaleTarget "))

	// b is deleted: a is decided again.
	views.views = []decide.View{{VA: a, Target: resolved(2, "p1", "p2")}, {VA: c, Target: resolved(1, "c1")}}
	clk.Step(30 * time.Second)
	cyc, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, cyc.Variants)
	assert.True(t, meta.IsStatusConditionTrue(writer.writes["a"].Conditions, llmdv1alpha1.ConditionTypeTargetResolved))
	assert.Equal(t, t0.Add(time.Minute), writer.writes["a"].DesiredOptimizedAlloc.LastRunTime.Time, "a decided")
	assert.Zero(t, testutil.ToFloat64(e.Observe.SharedTargetVariants))
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}
