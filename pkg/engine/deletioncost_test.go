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
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

func TestScaleDowns(t *testing.T) {
	withKind := func(kind string) *llmdv1alpha1.VariantAutoscaling {
		v := va("prod", kind, "m", "1", 0, 9)
		v.Spec.ScaleTargetRef.Kind = kind
		return v
	}
	deploy := llmdv1alpha1.ScaleTargetKindDeployment
	for _, tc := range []struct {
		name    string
		va      *llmdv1alpha1.VariantAutoscaling
		target  decide.Target
		desired int32
		want    bool
	}{
		{"deployment scaled down", withKind(deploy), resolved(3), 2, true},
		{"deployment scaled down by several", withKind(deploy), resolved(5), 1, true},
		{"unchanged", withKind(deploy), resolved(3), 3, false},
		{"scaled up", withKind(deploy), resolved(3), 4, false},
		{"to zero: every pod goes", withKind(deploy), resolved(3), 0, false},
		{"statefulset: highest ordinal goes", withKind(llmdv1alpha1.ScaleTargetKindStatefulSet), resolved(3), 2, false},
		{"leaderworkerset: highest group goes", withKind(llmdv1alpha1.ScaleTargetKindLeaderWorkerSet), resolved(3), 2, false},
		{"unresolved", withKind(deploy), decide.Target{SpecReplicas: 3}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := va("prod", "other", "m", "1", 0, 9)
			views := []decide.View{{VA: other, Target: resolved(3)}, {VA: tc.va, Target: tc.target}}
			plans := []decide.Plan{{VAs: []*llmdv1alpha1.VariantAutoscaling{other, tc.va}}}
			results := []decide.GroupResult{{Targets: []decision.Target{{Replicas: 3}, {Replicas: tc.desired}}}}
			got := scaleDowns(views, plans, results)
			if !tc.want {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Same(t, tc.va, got[0].VA)
		})
	}
}

// eventLog records the order of the engine's writes.
type eventLog []string

type fakeRunning struct {
	running map[collector.PodKey]float64
	err     error
	calls   int
}

func (f *fakeRunning) RequestsRunning(_ context.Context, namespaces []string, _ time.Time) (map[collector.PodKey]float64, error) {
	f.calls++
	return f.running, f.err
}

type fakeCostWriter struct {
	log   *eventLog
	costs map[string]map[string]*int32
}

func (f *fakeCostWriter) WriteCosts(_ context.Context, ns string, costs map[string]*int32) (int, error) {
	*f.log = append(*f.log, "costs "+ns)
	f.costs[ns] = costs
	return len(costs), nil
}

type loggingWriter struct {
	fakeWriter
	log *eventLog
}

func (w *loggingWriter) WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, st llmdv1alpha1.VariantAutoscalingStatus) error {
	*w.log = append(*w.log, fmt.Sprintf("status %s %d", va.Name, st.DesiredOptimizedAlloc.NumReplicas))
	return w.fakeWriter.WriteStatus(ctx, va, st)
}

// A scale-down annotates the Deployment's Ready pods with their running
// requests before the lower decision is written (what the HPA reads).
func TestRunOnceSetsDeletionCostsBeforePublishing(t *testing.T) {
	v := va("prod", "l4", "llama", "5", 1, 5)
	views := &fakeViews{views: []decide.View{{VA: v, Target: resolved(3, "p1", "p2", "p3")}}}
	metrics := &fakeMetrics{res: collector.Result{Queries: 6, Pods: pods("prod", 0.05, "p1", "p2", "p3"),
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "prod", Model: "llama"}: 10}}}}
	var log eventLog
	writer := &loggingWriter{fakeWriter: fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}, log: &log}
	running := &fakeRunning{running: map[collector.PodKey]float64{{Namespace: "prod", Pod: "p1"}: 4, {Namespace: "prod", Pod: "p2"}: 0,
		{Namespace: "prod", Pod: "other"}: 9}}
	costs := &fakeCostWriter{log: &log, costs: map[string]map[string]*int32{}}
	e := &Engine{Views: views, Metrics: metrics, Status: writer, Config: percentageStore(t, ""), Pipeline: decide.Default(),
		Observe: NewMetrics(prometheus.NewRegistry()), Clock: clocktesting.NewFakeClock(t0), Interval: 30 * time.Second,
		StatusHeartbeat: 2 * time.Minute, DeletionCosts: costs, Running: running}

	c, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, eventLog{"costs prod", "status l4 2"}, log, "costs first, then the lower decision")
	assert.Equal(t, map[string]*int32{"p1": ptr.To[int32](4), "p2": ptr.To[int32](0), "p3": nil}, costs.costs["prod"],
		"p3 has no sample: no annotation")
	assert.Equal(t, 7, c.Queries, "6 + the running-requests query")
	assert.Equal(t, 3, c.CostPatches)
	assert.Equal(t, 3.0, testutil.ToFloat64(e.Observe.DeletionCostPatches.WithLabelValues("ok")))

	// The query fails: the decision is still published, the error counted.
	log, running.err = nil, errors.New("prometheus down")
	views.views[0].Target = resolved(3, "p1", "p2", "p3")
	_, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(e.Observe.QueryErrors.WithLabelValues("requests_running")))
	assert.NotContains(t, log, "costs prod")

	// No scale-down: no query, no patch.
	running.calls, running.err, log = 0, nil, nil
	views.views[0].Target = resolved(2, "p1", "p2")
	metrics.res.Pods = pods("prod", 0.5, "p1", "p2")
	_, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, running.calls)
	assert.NotContains(t, log, "costs prod")
}
