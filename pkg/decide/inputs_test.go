package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
)

func TestBuildPlans(t *testing.T) {
	lost := va("prod", "b-h100", "llama", "15", 1, 4)
	lost.Status.Conditions = []metav1.Condition{{Type: llmdv1alpha1.ConditionTypeMetricsAvailable, Status: metav1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(t0.Add(-3 * time.Minute)), Reason: "MetricsMissing"}}
	views := []View{
		{VA: va("prod", "a-l4", "llama", "5", 1, 4), Target: resolved(2, "l4-1", "l4-2")},
		{VA: lost, Target: resolved(1, "h100-1")},
		{VA: va("prod", "gone", "llama", "5", 1, 4), Target: Target{Reason: "TargetNotFound"}},
		{VA: va("dev", "granite", "granite", "5", 0, 4), Target: resolved(0)},
		{VA: va("dev", "silent", "mistral", "5", 1, 4), Target: resolved(2, "m-1", "m-2")},
		{VA: va("dev", "loading", "phi", "5", 1, 4), Target: resolved(2)},
	}
	metrics := collector.Result{Pods: collectedPods("prod", 0.5, "l4-1", "l4-2"),
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "prod", Model: "llama"}: 30}}}
	metrics.Pods[collector.PodKey{Namespace: "prod", Pod: "h100-1"}] = collector.PodMetrics{HasKvCacheUsage: true} // no queue series: not reporting
	l4 := metrics.Pods[collector.PodKey{Namespace: "prod", Pod: "l4-1"}]
	l4.NumGPUBlocks, l4.BlockSize, l4.AvgInputTokens, l4.AvgOutputTokens = 1000, 16, 512, 128
	metrics.Pods[collector.PodKey{Namespace: "prod", Pod: "l4-1"}] = l4

	plans := BuildPlans(views, metrics, nil, defaults)
	require.Len(t, plans, 4)
	assert.Equal(t, GroupKey{"dev", "granite"}, plans[0].Key)
	assert.Equal(t, GroupKey{"dev", "mistral"}, plans[1].Key)
	assert.Equal(t, GroupKey{"dev", "phi"}, plans[2].Key)
	assert.Equal(t, GroupKey{"prod", "llama"}, plans[3].Key)

	assert.Equal(t, MetricsAvailable, plans[0].Input.Metrics, "a group at zero has nothing to report")
	require.NotNil(t, plans[0].Input.RequestsInRetention)
	assert.Zero(t, *plans[0].Input.RequestsInRetention)
	assert.Equal(t, MetricsMissing, plans[1].Input.Metrics, "Ready pods but no series: a scraping fault")
	assert.Equal(t, int32(2), plans[1].ReadyPods)
	assert.Nil(t, plans[1].Input.RequestsInRetention, "no counter with Ready pods is unknown, not 0")
	assert.Equal(t, MetricsAbsent, plans[2].Input.Metrics, "replicas, none Ready, no series")

	llama := plans[3]
	assert.Equal(t, MetricsAvailable, llama.Input.Metrics)
	require.Len(t, llama.VAs, 2, "the unresolved VA is left out")
	assert.Equal(t, "a-l4", llama.Input.Group.Variants[0].Name)
	assert.Equal(t, 5.0, llama.Input.Group.Variants[0].Cost)
	assert.Len(t, llama.Input.Group.Replicas, 2, "h100-1 lacks the queue series")
	tok := llama.Input.Group.Replicas[0]
	assert.Equal(t, "l4-1", tok.Pod)
	assert.Equal(t, [4]float64{1000, 16, 512, 128}, [4]float64{float64(tok.NumGPUBlocks), float64(tok.BlockSize), tok.AvgInputTokens, tok.AvgOutputTokens},
		"token analyzer inputs are carried from the collector")
	assert.Equal(t, 30.0, *llama.Input.RequestsInRetention)
	assert.Equal(t, t0.Add(-3*time.Minute), llama.Input.MetricsLastSeen)

	unreachable := BuildPlans(views, collector.Result{}, errors.New("down"), defaults)
	for _, p := range unreachable {
		assert.Equal(t, MetricsUnreachable, p.Input.Metrics)
		assert.Nil(t, p.Input.RequestsInRetention)
	}
}

func TestBuildPlansFillsAnalyzerInputs(t *testing.T) {
	l4 := va("prod", "l4", "llama", "5", 1, 4)
	views := []View{{VA: l4, Target: Target{Resolved: true, SpecReplicas: 2, ReadyPods: []string{"p1", "p2"}, MaxNumSeqs: 64, MaxNumBatchedTokens: 4096,
		StartupDelay: 95 * time.Second}}}
	reporting := collector.PodMetrics{HasKvCacheUsage: true, HasQueueLength: true, ArrivalRate: 2.5, AvgTTFTms: 120, AvgITLms: 15, AvgInputTokens: 512, AvgOutputTokens: 128}
	tests := []struct {
		name      string
		metrics   collector.Result
		err       error
		wantRate  []float64
		wantQueue [2]float64
		// wantGateway is the gateway arrival rate, nil when not reported.
		wantGateway *float64
	}{
		{
			name: "per-pod rate and latencies, EPP queue of the model in the namespace and unlabelled",
			metrics: collector.Result{
				Pods: map[collector.PodKey]collector.PodMetrics{{Namespace: "prod", Pod: "p1"}: reporting, {Namespace: "prod", Pod: "p2"}: reporting},
				SchedulerQueues: map[collector.ModelKey]collector.EPPQueue{
					{Namespace: "prod", Model: "llama"}: {Size: 3, Bytes: 300}, {Model: "llama"}: {Size: 1, Bytes: 100},
					{Namespace: "dev", Model: "llama"}: {Size: 50}, {Namespace: "prod", Model: "other"}: {Size: 70},
				},
				GatewayArrivals: map[collector.ModelKey]float64{
					{Namespace: "prod", Model: "llama"}: 6, {Model: "llama"}: 1.5,
					{Namespace: "dev", Model: "llama"}: 50, {Namespace: "prod", Model: "other"}: 70,
				},
			},
			wantRate:    []float64{2.5, 2.5},
			wantQueue:   [2]float64{4, 400},
			wantGateway: ptr(7.5),
		},
		{
			name: "a gateway series at rate 0 is reported, not missing",
			metrics: collector.Result{
				Pods:            map[collector.PodKey]collector.PodMetrics{{Namespace: "prod", Pod: "p1"}: reporting, {Namespace: "prod", Pod: "p2"}: reporting},
				GatewayArrivals: map[collector.ModelKey]float64{{Namespace: "prod", Model: "llama"}: 0, {Namespace: "dev", Model: "llama"}: 9},
			},
			wantRate:    []float64{2.5, 2.5},
			wantGateway: ptr(0.0),
		},
		{
			name:      "a pod without the saturation gauges is not a replica, whatever else it reports",
			metrics:   collector.Result{Pods: map[collector.PodKey]collector.PodMetrics{{Namespace: "prod", Pod: "p1"}: reporting, {Namespace: "prod", Pod: "p2"}: {ArrivalRate: 9}}},
			wantRate:  []float64{2.5},
			wantQueue: [2]float64{0, 0},
		},
		{
			name: "metrics unreachable: no queue or arrivals are made up",
			metrics: collector.Result{SchedulerQueues: map[collector.ModelKey]collector.EPPQueue{{Namespace: "prod", Model: "llama"}: {Size: 3}},
				GatewayArrivals: map[collector.ModelKey]float64{{Namespace: "prod", Model: "llama"}: 6}},
			err: errors.New("connection refused"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plans := BuildPlans(views, tt.metrics, tt.err, defaults)
			require.Len(t, plans, 1)
			g := plans[0].Input.Group
			require.Len(t, g.Variants, 1)
			assert.Equal(t, int64(64), g.Variants[0].MaxNumSeqs, "engine args from the target")
			assert.Equal(t, int64(4096), g.Variants[0].MaxNumBatchedTokens)
			assert.Equal(t, 95*time.Second, g.Variants[0].StartupDelay, "start-up delay measured from the target's pods")
			var rates []float64
			for _, r := range g.Replicas {
				rates = append(rates, r.ArrivalRate)
				assert.Equal(t, 120.0, r.AvgTTFTms)
				assert.Equal(t, 15.0, r.AvgITLms)
			}
			assert.Equal(t, tt.wantRate, rates)
			assert.Equal(t, tt.wantQueue, [2]float64{g.SchedulerQueueSize, g.SchedulerQueueBytes})
			if tt.wantGateway == nil {
				assert.False(t, g.GatewayArrivalsReported, "no series for the group")
				assert.Zero(t, g.GatewayArrivalRate)
			} else {
				assert.True(t, g.GatewayArrivalsReported)
				assert.Equal(t, *tt.wantGateway, g.GatewayArrivalRate)
			}
		})
	}
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
			wantWake: wake, wantStart: 5 * time.Minute, wantReqs: ptr(0.0)},
		{name: "unreadable annotation is no wake", va: wokenVA("yesterday"), target: resolved(1),
			metrics: collector.Result{Requests: noSeries}, wantReqs: ptr(0.0)},
		{name: "no series with Ready reporting pods is a fault, not zero", va: wokenVA(""), target: resolved(2, "g-1", "g-2"),
			metrics: collector.Result{Pods: collectedPods("dev", 0, "g-1", "g-2"), Requests: noSeries}, wantFault: true},
		{name: "the counter reading 0 is evidence", va: wokenVA(""), target: resolved(2, "g-1", "g-2"),
			metrics: collector.Result{Pods: collectedPods("dev", 0, "g-1", "g-2"), Requests: requests(0)}, wantReqs: ptr(0.0)},
		{name: "gateway queue reaches the group", va: wokenVA(""), target: resolved(0),
			metrics:  collector.Result{Requests: noSeries, SchedulerQueues: map[collector.ModelKey]collector.EPPQueue{{Namespace: "dev", Model: "granite"}: {Size: 7}}},
			wantReqs: ptr(0.0), wantQueued: 7},
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
