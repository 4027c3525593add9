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

	"github.com/wva-project/wva/pkg/analyzer/saturation"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/pipeline"
)

func TestSetStuckCondition(t *testing.T) {
	h100 := saturation.Stuck{Variant: "h100", Since: t0.Add(-time.Hour), For: params.Duration(time.Hour), Bound: params.Duration(20 * time.Minute),
		Desired: 1, Current: 1, Pending: 1}
	stuckCond := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: llmdv1alpha1.ConditionTypeTransitionStuck, Status: status, Reason: llmdv1alpha1.ReasonStuckTransition,
			Message: h100.Message(), LastTransitionTime: metav1.NewTime(t0.Add(-10 * time.Minute))}}
	}
	cases := []struct {
		name       string
		had        []metav1.Condition
		analysis   any
		wantStatus metav1.ConditionStatus // "" = no condition
		wantReason string
		wantOnset  bool
	}{
		{name: "stuck now, not before: True and one onset", analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition, wantOnset: true},
		{name: "still stuck: True, no second onset", had: stuckCond(metav1.ConditionTrue), analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition},
		{name: "stuck again after recovering: a new onset", had: stuckCond(metav1.ConditionFalse), analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition, wantOnset: true},
		{name: "recovered: False", had: stuckCond(metav1.ConditionTrue), analysis: saturation.Analysis{},
			wantStatus: metav1.ConditionFalse, wantReason: llmdv1alpha1.ReasonNoStuckTransition},
		{name: "never stuck: no condition", analysis: saturation.Analysis{}},
		{name: "another variant stuck: not this one", analysis: saturation.Analysis{Stuck: []saturation.Stuck{{Variant: "l4"}}}},
		{name: "no analysis (metrics down): kept as it was", had: stuckCond(metav1.ConditionTrue),
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := va("prod", "h100", "llama", "40", 0, 4)
			v.Status.Conditions = tc.had
			st := *v.Status.DeepCopy()
			onset := setStuckCondition(&st, v, pipeline.GroupResult{Analysis: tc.analysis}, t0)
			c := meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck)
			if tc.wantStatus == "" {
				assert.Nil(t, c)
			} else {
				require.NotNil(t, c)
				assert.Equal(t, tc.wantStatus, c.Status)
				assert.Equal(t, tc.wantReason, c.Reason)
			}
			if tc.wantOnset {
				assert.Equal(t, h100.Message(), onset)
				assert.Equal(t, h100.Message(), c.Message)
			} else {
				assert.Empty(t, onset)
			}
		})
	}
}

// Through engine cycles: an H100 pod that never turns Ready shows on its VA
// as TransitionStuck=True with one Warning Event StuckTransition at the
// onset, none on later cycles, and False once the pod reports.
func TestRunOnceStuckTransitionConditionAndEvent(t *testing.T) {
	l4 := va("prod", "l4", "llama", "5", 1, 8)
	h100 := va("prod", "h100", "llama", "40", 0, 4)
	decided := metav1.NewTime(t0.Add(-5 * time.Minute))
	h100.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 1, LastUpdate: decided, LastRunTime: decided}
	l4.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 2, LastUpdate: metav1.NewTime(t0.Add(-time.Hour)), LastRunTime: decided}
	views := &fakeViews{views: []View{
		{VA: l4, Target: resolved(2, "l4-1", "l4-2")},
		{VA: h100, Target: Target{Resolved: true, SpecReplicas: 1, PendingPods: 1}},
	}}
	metrics := &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.95, "l4-1", "l4-2")}}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	rec := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(t0)
	e := &Engine{Views: views, Metrics: metrics, Status: writer, Config: percentageStore(t, ""), Pipeline: pipeline.Default(), Recorder: rec,
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
