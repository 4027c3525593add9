package engine

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

// Series absent while the target's pods are Ready is a scraping fault: the
// group is held, MetricsAvailable=False names it and wva_metrics_available
// is 0, even an hour after metrics were lost (past the 10m retention). With
// no Ready pod the retention fallback of the design notes still applies.
func TestRunOnceMetricsMissingWithReadyPods(t *testing.T) {
	cases := []struct {
		name       string
		target     decide.Target
		want       int32
		wantRule   decision.Rule
		wantReason string
		wantMsg    string
	}{
		{name: "four Ready pods, no series: held at 4", target: resolved(4, "l-1", "l-2", "l-3", "l-4"),
			want: 4, wantRule: decision.RuleMetricsMissing, wantReason: llmdv1alpha1.ReasonMetricsMissingWithReadyPods,
			wantMsg: "variant llama has 4 Ready pods (model \"llama\": 4) but none reports vLLM metrics"},
		{name: "no Ready pod, no series: retention fallback to zero", target: decide.Target{Resolved: true, SpecReplicas: 4, PendingPods: 4},
			want: 0, wantRule: decision.RuleRetention, wantReason: llmdv1alpha1.ReasonMetricsMissing,
			wantMsg: "no replica of model \"llama\" reports vLLM metrics"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := config.NewStore()
			require.NoError(t, store.Apply(config.ScaleToZeroConfigMapName, map[string]string{config.DefaultKey: "enable_scale_to_zero: true\nretention_period: 10m"}))
			llama := va("prod", "llama", "llama", "5", 0, 8)
			hourAgo := metav1.NewTime(t0.Add(-time.Hour))
			llama.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 4, LastUpdate: hourAgo, LastRunTime: metav1.NewTime(t0.Add(-30 * time.Second))}
			llama.Status.Conditions = []metav1.Condition{{Type: llmdv1alpha1.ConditionTypeMetricsAvailable, Status: metav1.ConditionFalse,
				Reason: llmdv1alpha1.ReasonMetricsMissing, LastTransitionTime: hourAgo}}
			writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
			e := &Engine{Views: &fakeViews{views: []decide.View{{VA: llama, Target: tc.target}}},
				Metrics: &fakeMetrics{res: collector.Result{Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {}}}},
				Status:  writer, Config: store, Pipeline: decide.Default(), Observe: NewMetrics(prometheus.NewRegistry()),
				Clock: clocktesting.NewFakeClock(t0), Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}
			c, err := e.RunOnce(context.Background())
			require.NoError(t, err)

			st := writer.writes["llama"]
			assert.Equal(t, tc.want, st.DesiredOptimizedAlloc.NumReplicas, st.DesiredOptimizedAlloc.Reason)
			assert.Equal(t, tc.wantRule, c.Results[0].Targets[0].Rule)
			cond := meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
			require.NotNil(t, cond)
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, tc.wantReason, cond.Reason)
			assert.Contains(t, cond.Message, tc.wantMsg)
			assert.Equal(t, 0.0, testutil.ToFloat64(e.Observe.MetricsOK.WithLabelValues("prod", "llama")), "wva_metrics_available")
		})
	}
}

// wva_metrics_available is 1 for a group whose metrics were collected and
// its series goes with the group.
func TestMetricsAvailableGauge(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.Publish(nil, []GroupSample{{Labels: [2]string{"prod", "a"}, MetricsAvailable: true}, {Labels: [2]string{"prod", "b"}}})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.MetricsOK.WithLabelValues("prod", "a")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.MetricsOK.WithLabelValues("prod", "b")))
	m.Publish(nil, []GroupSample{{Labels: [2]string{"prod", "a"}, MetricsAvailable: true}})
	assert.Equal(t, 1, testutil.CollectAndCount(m.MetricsOK), "a deleted group's series must go")
}
