package engine

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func va(ns, name, model string, cost string, min, max int32) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			ModelID:        model, MinReplicas: ptr.To(min), MaxReplicas: max, VariantCost: cost,
		},
	}
}

func resolved(replicas int32, ready ...string) decide.Target {
	return decide.Target{Resolved: true, SpecReplicas: replicas, ReadyPods: ready}
}

func pods(ns string, kv float64, names ...string) map[collector.PodKey]collector.PodMetrics {
	out := map[collector.PodKey]collector.PodMetrics{}
	for _, n := range names {
		out[collector.PodKey{Namespace: ns, Pod: n}] = collector.PodMetrics{KvCacheUsage: kv, HasKvCacheUsage: true, HasQueueLength: true}
	}
	return out
}

func defaults(model, ns string) params.Resolved { return config.NewStore().Resolve(model, ns) }

// fakes for the engine's seams (unit tests only; test/integration runs the
// real API server and Prometheus).
type fakeViews struct{ views []decide.View }

func (f *fakeViews) Views() ([]decide.View, error) { return f.views, nil }

type fakeMetrics struct {
	res collector.Result
	err error
}

func (f *fakeMetrics) Collect(context.Context, collector.Request) (collector.Result, error) {
	return f.res, f.err
}

type fakeWriter struct {
	writes map[string]llmdv1alpha1.VariantAutoscalingStatus
}

func (f *fakeWriter) WriteStatus(_ context.Context, va *llmdv1alpha1.VariantAutoscaling, st llmdv1alpha1.VariantAutoscalingStatus) error {
	f.writes[va.Name] = st
	va.Status = st // what the informer would show next
	return nil
}

func TestRunOnce(t *testing.T) {
	v := va("prod", "l4", "llama", "5", 1, 5)
	views := &fakeViews{views: []decide.View{{VA: v, Target: resolved(2, "p1", "p2")}}}
	metrics := &fakeMetrics{res: collector.Result{Queries: 6, Pods: pods("prod", 0.78, "p1", "p2"),
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "prod", Model: "llama"}: 10}}}}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(10)
	e := &Engine{Views: views, Metrics: metrics, Status: writer, Config: percentageStore(t, ""), Pipeline: decide.Default(),
		Recorder: rec, Observe: NewMetrics(reg), Clock: clk, Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}

	c, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, c.Groups)
	assert.Equal(t, 6, c.Queries)
	assert.Equal(t, 1, c.StatusWrites)
	assert.Equal(t, int32(3), writer.writes["l4"].DesiredOptimizedAlloc.NumReplicas, "KV 0.78 -> scale-up")
	assert.Equal(t, 3.0, testutil.ToFloat64(e.Observe.DesiredReplicas.WithLabelValues("l4", "prod", "llama", "")))
	assert.Equal(t, 1.0, testutil.ToFloat64(e.Observe.Decisions.WithLabelValues("scale-up", "scale-up")))
	assert.Contains(t, nextEvent(t, rec), "DesiredReplicasChanged desired replicas 0 -> 3")
	assert.False(t, e.LastSuccess().IsZero())

	// The HPA has not applied it yet (current 2, desired 3): the model is in
	// transition and the decision holds; the rule changed, so it is written.
	clk.Step(30 * time.Second)
	c, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, c.StatusWrites)
	assert.Equal(t, int32(3), writer.writes["l4"].DesiredOptimizedAlloc.NumReplicas)
	assert.Contains(t, meta.FindStatusCondition(writer.writes["l4"].Conditions, llmdv1alpha1.ConditionTypeOptimizationReady).Message, "transition-hold")

	// Same again with different live figures: within the heartbeat only
	// lastRunTime and the reason's numbers would move, so nothing is written.
	metrics.res.Pods = pods("prod", 0.76, "p1", "p2")
	clk.Step(30 * time.Second)
	c, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, c.StatusWrites, "unchanged decision within the heartbeat is not rewritten")

	clk.Step(3 * time.Minute)
	c, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, c.StatusWrites, "heartbeat refreshes lastRunTime")

	// Prometheus fails: decision held, condition says so, error counted.
	metrics.err = &collector.QueryError{Query: "queue_length", Err: errors.New("connection refused")}
	clk.Step(30 * time.Second)
	c, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	require.Error(t, c.MetricsErr)
	st := writer.writes["l4"]
	assert.Equal(t, int32(3), st.DesiredOptimizedAlloc.NumReplicas)
	assert.False(t, meta.IsStatusConditionTrue(st.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable))
	assert.Equal(t, 1.0, testutil.ToFloat64(e.Observe.QueryErrors.WithLabelValues("queue_length")))
}

func TestRunOnceUnresolvedTarget(t *testing.T) {
	v := va("prod", "l4", "llama", "5", 1, 5)
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	rec := record.NewFakeRecorder(10)
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: v, Target: decide.Target{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: "Deployment prod/l4 not found"}}}},
		Metrics: &fakeMetrics{}, Status: writer, Config: config.NewStore(), Pipeline: decide.Default(), Recorder: rec,
		Clock: clocktesting.NewFakeClock(t0), Interval: time.Second, StatusHeartbeat: time.Minute}
	_, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	c := meta.FindStatusCondition(writer.writes["l4"].Conditions, llmdv1alpha1.ConditionTypeTargetResolved)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "Deployment prod/l4 not found", c.Message)
	assert.Contains(t, nextEvent(t, rec), "TargetNotFound")
}

func nextEvent(t *testing.T, rec *record.FakeRecorder) string {
	t.Helper()
	select {
	case e := <-rec.Events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event recorded")
		return ""
	}
}

// TestRunClearsGaugesWhenItStops: the engine stops when its replica loses
// the Lease; that replica must not keep exporting the decisions it made.
func TestRunClearsGaugesWhenItStops(t *testing.T) {
	v := va("prod", "l4", "llama", "5", 1, 5)
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: v, Target: resolved(2, "p1", "p2")}}},
		Metrics: &fakeMetrics{res: collector.Result{Queries: 6, Pods: pods("prod", 0.5, "p1", "p2")}},
		Status:  &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}, Config: config.NewStore(), Pipeline: decide.Default(),
		Recorder: record.NewFakeRecorder(10), Observe: NewMetrics(prometheus.NewRegistry()), Clock: clocktesting.NewFakeClock(t0),
		Interval: time.Hour, StatusHeartbeat: 2 * time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return !e.LastSuccess().IsZero() }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, testutil.CollectAndCount(e.Observe.DesiredReplicas), "leader exports its decision")
	cancel()
	<-done
	assert.Equal(t, 0, testutil.CollectAndCount(e.Observe.DesiredReplicas), "gone once it stops leading")
	assert.Equal(t, 0, testutil.CollectAndCount(e.Observe.CurrentReplicas))
}

// fixedBudget is one pool per accelerator whose free GPUs are given; each
// variant in it holds its replicas * gpusPerReplica.
type fixedBudget struct {
	free  decision.Free
	calls int
}

func (f *fixedBudget) LimiterUsage(ws []budget.Workload) ([]budget.Variant, map[string]budget.Usage, error) {
	f.calls++
	usage := map[string]budget.Usage{}
	for acc, n := range f.free {
		usage[acc] = budget.Usage{Pool: acc, Total: budget.Amount{GPUs: n, GPUMemory: budget.Unlimited}}
	}
	var vs []budget.Variant
	for _, w := range ws {
		pool := ""
		if _, ok := f.free[w.VA.Spec.AcceleratorName]; ok {
			pool = w.VA.Spec.AcceleratorName
		}
		v := budget.NewVariant(w, pool)
		vs = append(vs, v)
		if u, ok := usage[pool]; ok {
			held := v.PerReplica.Times(v.Replicas)
			u.Total = u.Total.Add(budget.Amount{GPUs: held.GPUs})
			u.Allocated = u.Allocated.Add(held)
			u.Holders = append(u.Holders, budget.Holder{Name: v.Key, Amount: held})
			usage[pool] = u
		}
	}
	return vs, usage, nil
}

func TestRunOnceLimitedGroupGetsTheBudget(t *testing.T) {
	h100 := va("prod", "h100", "llama", "5", 1, 8)
	h100.Spec.AcceleratorName, h100.Spec.GPUsPerReplica = "H100", ptr.To(int32(2))
	newEngine := func(limiter bool, b *fixedBudget) (*Engine, *fakeWriter) {
		store := percentageStore(t, fmt.Sprintf("enableLimiter: %t", limiter))
		writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
		// KV 0.95 on both: saturated, the analyzer asks for more.
		metrics := &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.95, "p1", "p2")}}
		return &Engine{Views: &fakeViews{views: []decide.View{{VA: h100.DeepCopy(), Target: resolved(2, "p1", "p2")}}}, Metrics: metrics,
			Status: writer, Config: store, Pipeline: decide.Default(), Budget: b, Clock: clocktesting.NewFakeClock(t0)}, writer
	}
	tests := []struct {
		name       string
		limiter    bool
		budget     decision.Free
		want       int32
		wantRule   string
		wantReason string
	}{
		{name: "no room: held at current, reason says what was cut", limiter: true, budget: decision.Free{"H100": 1}, want: 2,
			wantRule: string(decision.RuleGPULimited), wantReason: "H100 budget 1 GPUs"},
		{name: "room for one more", limiter: true, budget: decision.Free{"H100": 2}, want: 3},
		// Admission applies to every group: the limiter only shares the
		// GPUs among limited ones.
		{name: "limiter off: admission still holds at current", limiter: false, budget: decision.Free{"H100": 0}, want: 2,
			wantRule: string(decision.RuleGPULimited), wantReason: "GPU budget: prod/h100 +1 (2 GPUs each) cut to +0: pool H100 has 0 GPUs, unlimited GPU memory left of 4 GPUs, unlimited GPU memory, held by the variant itself"},
		{name: "limiter off, room for one more", limiter: false, budget: decision.Free{"H100": 2}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fixedBudget{free: tt.budget}
			e, writer := newEngine(tt.limiter, b)
			c, err := e.RunOnce(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 1, b.calls)
			alloc := writer.writes["h100"].DesiredOptimizedAlloc
			assert.Equal(t, tt.want, alloc.NumReplicas, alloc.Reason)
			if tt.wantRule != "" {
				assert.Equal(t, tt.wantRule, string(c.Results[0].Targets[0].Rule))
				assert.Contains(t, alloc.Reason, tt.wantReason)
			}
		})
	}
}

// A variant's spec.scaleToZeroRetention adds its window: the group's
// retention (decide.GroupRetention) is then counted over the window the
// collector queried.
func TestWindowsCoverVariantRetention(t *testing.T) {
	long := va("prod", "long", "m", "5", 0, 4)
	long.Spec.ScaleToZeroRetention = &metav1.Duration{Duration: 25 * time.Minute}
	views := []decide.View{{VA: va("prod", "plain", "m", "5", 0, 4), Target: resolved(1, "p-0")}, {VA: long, Target: resolved(1, "l-0")}}
	assert.Equal(t, []time.Duration{10 * time.Minute, 30 * time.Minute}, Windows(views, defaults))

	metrics := collector.Result{Requests: map[time.Duration]map[collector.ModelKey]float64{
		10 * time.Minute: {{Namespace: "prod", Model: "m"}: 0}, 30 * time.Minute: {{Namespace: "prod", Model: "m"}: 6}}}
	plans := decide.BuildPlans(views, metrics, nil, defaults)
	require.Len(t, plans, 1)
	require.NotNil(t, plans[0].Input.RequestsInRetention)
	assert.Equal(t, 6.0, *plans[0].Input.RequestsInRetention, "counted over the 25m retention's 30m window")
}

// Retention periods are counted over their idle window: models with 3m and
// 4m periods share one 5m request-count query, and each group reads it.
func TestWindowsRoundedToIdleWindows(t *testing.T) {
	periods := map[string]time.Duration{"a": 3 * time.Minute, "b": 4 * time.Minute, "c": 10 * time.Minute}
	resolve := func(model, ns string) params.Resolved {
		r := defaults(model, ns)
		r.ScaleToZero.RetentionPeriod = params.Duration(periods[model])
		return r
	}
	views := []decide.View{{VA: va("prod", "a", "a", "5", 1, 4), Target: resolved(1, "a-0")},
		{VA: va("prod", "b", "b", "5", 1, 4), Target: resolved(1, "b-0")},
		{VA: va("prod", "c", "c", "5", 1, 4), Target: resolved(1, "c-0")}}
	assert.Equal(t, []time.Duration{5 * time.Minute, 10 * time.Minute}, Windows(views, resolve))

	metrics := collector.Result{Requests: map[time.Duration]map[collector.ModelKey]float64{
		5 * time.Minute:  {{Namespace: "prod", Model: "a"}: 0, {Namespace: "prod", Model: "b"}: 4},
		10 * time.Minute: {{Namespace: "prod", Model: "c"}: 9},
	}}
	got := map[string]float64{}
	for _, p := range decide.BuildPlans(views, metrics, nil, resolve) {
		require.NotNil(t, p.Input.RequestsInRetention, p.Key.ModelID)
		got[p.Key.ModelID] = *p.Input.RequestsInRetention
	}
	assert.Equal(t, map[string]float64{"a": 0, "b": 4, "c": 9}, got)
}
