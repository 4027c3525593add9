package engine

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/pipeline"
)

func scaleToZeroOn(model, ns string) params.Resolved {
	r := config.NewStore().Resolve(model, ns)
	r.ScaleToZero = params.ScaleToZero{Enabled: true, RetentionPeriod: params.Duration(10 * time.Minute)}
	return r
}

// wokenVA is a VA decided to 0 fifteen minutes ago, annotated by the fast
// path.
func wokenVA(annotation string) *llmdv1alpha1.VariantAutoscaling {
	v := va("dev", "granite", "granite", "5", 0, 4)
	if annotation != "" {
		v.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: annotation}
	}
	v.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, LastUpdate: metav1.NewTime(t0.Add(-15 * time.Minute)),
		LastRunTime: metav1.NewTime(t0.Add(-30 * time.Second))}
	return v
}

// BuildPlans turns the fast path's annotation, the startupProbe allowance
// and the request counter's presence into the pipeline's inputs.
func TestBuildPlansScaleToZeroInputs(t *testing.T) {
	wake := t0.Add(-40 * time.Second)
	requests := func(n float64) map[time.Duration]map[collector.ModelKey]float64 {
		return map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "dev", Model: "granite"}: n}}
	}
	noSeries := map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {}}
	cases := []struct {
		name       string
		va         *llmdv1alpha1.VariantAutoscaling
		target     Target
		metrics    collector.Result
		wantWake   time.Time
		wantStart  time.Duration
		wantReqs   *float64
		wantFault  bool
		wantQueued float64
	}{
		{name: "wake annotation read, pod loading", va: wokenVA(wake.Format(time.RFC3339Nano)),
			target:   Target{Resolved: true, SpecReplicas: 1, PendingPods: 1, StartupAllowance: 5 * time.Minute},
			metrics:  collector.Result{Requests: noSeries},
			wantWake: wake, wantStart: 5 * time.Minute, wantReqs: ptrTo(0.0)},
		{name: "unreadable annotation is no wake", va: wokenVA("yesterday"), target: resolved(1),
			metrics: collector.Result{Requests: noSeries}, wantReqs: ptrTo(0.0)},
		{name: "no series with Ready reporting pods is a fault, not zero", va: wokenVA(""), target: resolved(2, "g-1", "g-2"),
			metrics: collector.Result{Pods: pods("dev", 0, "g-1", "g-2"), Requests: noSeries}, wantFault: true},
		{name: "the counter reading 0 is evidence", va: wokenVA(""), target: resolved(2, "g-1", "g-2"),
			metrics: collector.Result{Pods: pods("dev", 0, "g-1", "g-2"), Requests: requests(0)}, wantReqs: ptrTo(0.0)},
		{name: "gateway queue reaches the group", va: wokenVA(""), target: resolved(0),
			metrics:  collector.Result{Requests: noSeries, SchedulerQueues: map[collector.ModelKey]collector.EPPQueue{{Namespace: "dev", Model: "granite"}: {Size: 7}}},
			wantReqs: ptrTo(0.0), wantQueued: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans := BuildPlans([]View{{VA: tc.va, Target: tc.target}}, tc.metrics, nil, scaleToZeroOn)
			require.Len(t, plans, 1)
			in := plans[0].Input
			v := in.Group.Variants[0]
			assert.True(t, tc.wantWake.Equal(v.ScaledFromZeroAt), "wake %v", v.ScaledFromZeroAt)
			assert.Equal(t, tc.wantStart, v.StartupAllowance)
			assert.Equal(t, tc.wantReqs, in.RequestsInRetention)
			assert.Equal(t, tc.wantFault, in.RequestCountMissing())
			assert.Equal(t, tc.wantQueued, in.Group.SchedulerQueueSize)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// Through a whole engine cycle: a woken group is not sent back to zero, and
// a missing request counter holds the replicas with MetricsAvailable=False
// (RequestCountMissing).
func TestRunOnceScaleToZeroUnderFaults(t *testing.T) {
	store := config.NewStore()
	require.NoError(t, store.Apply(config.ScaleToZeroConfigMapName, map[string]string{config.DefaultKey: "enable_scale_to_zero: true\nretention_period: 10m"}))
	woken := wokenVA(t0.Add(-40 * time.Second).Format(time.RFC3339Nano))
	llama := va("prod", "llama", "llama", "5", 0, 8)
	llama.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 4, LastUpdate: metav1.NewTime(t0.Add(-time.Hour))}
	views := &fakeViews{views: []View{
		{VA: woken, Target: Target{Resolved: true, SpecReplicas: 1, PendingPods: 1}},
		{VA: llama, Target: resolved(4, "l-1", "l-2", "l-3", "l-4")},
	}}
	// Prometheus answers: the llama pods report, but no request series.
	metrics := &fakeMetrics{res: collector.Result{Pods: pods("prod", 0, "l-1", "l-2", "l-3", "l-4"),
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {}}}}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	e := &Engine{Views: views, Metrics: metrics, Status: writer, Config: store, Pipeline: pipeline.Default(),
		Observe: NewMetrics(prometheus.NewRegistry()), Clock: clocktesting.NewFakeClock(t0), Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}
	_, err := e.RunOnce(context.Background())
	require.NoError(t, err)

	g := writer.writes["granite"]
	assert.Equal(t, int32(1), g.DesiredOptimizedAlloc.NumReplicas, g.DesiredOptimizedAlloc.Reason)
	assert.Contains(t, g.DesiredOptimizedAlloc.Reason, "scaled from zero 40s ago")
	assert.Contains(t, meta.FindStatusCondition(g.Conditions, llmdv1alpha1.ConditionTypeOptimizationReady).Message, string(decision.RuleZeroBlocked))

	l := writer.writes["llama"]
	assert.Equal(t, int32(4), l.DesiredOptimizedAlloc.NumReplicas, l.DesiredOptimizedAlloc.Reason)
	c := meta.FindStatusCondition(l.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, llmdv1alpha1.ReasonRequestCountMissing, c.Reason)
	assert.Contains(t, c.Message, "vllm:request_success_total has no series")

	// The counter comes back at 0 with idle pods: now the group is idle
	// with evidence and goes to zero; the condition recovers.
	metrics.res.Requests[10*time.Minute] = map[collector.ModelKey]float64{{Namespace: "prod", Model: "llama"}: 0}
	_, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	l = writer.writes["llama"]
	assert.Equal(t, int32(0), l.DesiredOptimizedAlloc.NumReplicas, l.DesiredOptimizedAlloc.Reason)
	assert.True(t, meta.IsStatusConditionTrue(l.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable))
}
