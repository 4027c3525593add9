package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// Through engine cycles: an H100 pod that never turns Ready shows on its VA
// as TransitionStuck=True with one Warning Event StuckTransition at the
// onset, none on later cycles, and False once the pod reports.
func TestRunOnceStuckTransitionConditionAndEvent(t *testing.T) {
	l4 := va("prod", "l4", "llama", "5", 1, 8)
	h100 := va("prod", "h100", "llama", "40", 0, 4)
	decided := metav1.NewTime(t0.Add(-5 * time.Minute))
	h100.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 1, LastUpdate: decided, LastRunTime: decided}
	l4.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 2, LastUpdate: metav1.NewTime(t0.Add(-time.Hour)), LastRunTime: decided}
	views := &fakeViews{views: []decide.View{
		{VA: l4, Target: resolved(2, "l4-1", "l4-2")},
		{VA: h100, Target: decide.Target{Resolved: true, SpecReplicas: 1, PendingPods: 1}},
	}}
	metrics := &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.95, "l4-1", "l4-2")}}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	rec := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(t0)
	e := &Engine{Views: views, Metrics: metrics, Status: writer, Config: percentageStore(t, ""), Pipeline: decide.Default(), Recorder: rec,
		Clock: clk, Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}

	steps := []struct {
		name       string
		advance    time.Duration
		ready      bool // the H100 pod turns Ready and reports
		wantStatus metav1.ConditionStatus
		wantEvents int
	}{
		{name: "5m in transition (bound 20m): ordinary, no condition", advance: 0},
		{name: "25m: stuck, condition and one Event", advance: 20 * time.Minute, wantStatus: metav1.ConditionTrue, wantEvents: 1},
		{name: "next cycle: still True, no second Event", advance: 30 * time.Second, wantStatus: metav1.ConditionTrue},
		{name: "an hour later: still no second Event", advance: time.Hour, wantStatus: metav1.ConditionTrue},
		{name: "the pod reports: False", advance: 30 * time.Second, ready: true, wantStatus: metav1.ConditionFalse},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		if i > 1 {
			// The L4s' HPA followed the scale-up; their pods serve with headroom.
			n := l4.Status.DesiredOptimizedAlloc.NumReplicas
			var names []string
			for j := int32(0); j < n; j++ {
				names = append(names, fmt.Sprintf("l4-%d", j+1))
			}
			views.views[0].Target = resolved(n, names...)
			for _, p := range names {
				metrics.res.Pods[collector.PodKey{Namespace: "prod", Pod: p}] = collector.PodMetrics{KvCacheUsage: 0.5, HasKvCacheUsage: true, HasQueueLength: true}
			}
		}
		if s.ready {
			views.views[1].Target = resolved(1, "h100-1")
			metrics.res.Pods[collector.PodKey{Namespace: "prod", Pod: "h100-1"}] = collector.PodMetrics{KvCacheUsage: 0.3, HasKvCacheUsage: true, HasQueueLength: true}
		}
		_, err := e.RunOnce(context.Background())
		require.NoError(t, err, s.name)
		c := meta.FindStatusCondition(h100.Status.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck)
		if s.wantStatus == "" {
			assert.Nil(t, c, s.name)
		} else if assert.NotNil(t, c, s.name) {
			assert.Equal(t, s.wantStatus, c.Status, s.name)
			if s.wantStatus == metav1.ConditionTrue {
				assert.Equal(t, llmdv1alpha1.ReasonStuckTransition, c.Reason, s.name)
				assert.Contains(t, c.Message, "h100 in transition since "+decided.UTC().Format(time.RFC3339), s.name)
				assert.Contains(t, c.Message, "1 pods not Ready", s.name)
				// ClientStatusWriter writes only the engine's conditions.
				var merged llmdv1alpha1.VariantAutoscalingStatus
				MergeEngineStatus(&merged, writer.writes["h100"])
				assert.NotNil(t, meta.FindStatusCondition(merged.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck), "TransitionStuck is engine-owned")
			}
		}
		assert.Nil(t, meta.FindStatusCondition(l4.Status.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck), "%s: l4 is not stuck", s.name)
		events := 0
		for drained := false; !drained; {
			select {
			case ev := <-rec.Events:
				if strings.HasPrefix(ev, "Warning StuckTransition") {
					assert.Contains(t, ev, "Warning StuckTransition h100 in transition since", s.name)
					events++
				}
			default:
				drained = true
			}
		}
		assert.Equal(t, s.wantEvents, events, s.name)
	}
}
