package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// A group scaled 2 -> 3 at KV 0.79, now 0.53 on each of 3 Ready pods; the
// first two still read their peak in the 1-minute max_over_time window. An
// adapter deciding from what anyone can read (VA status, the pods' Ready
// times, Prometheus), as a new leader's first cycle does, keeps 3 until
// the peak is older than the window.
func TestScaleUpAnsweredByTheNewestReplica(t *testing.T) {
	now := t0
	decided := now.Add(-22 * time.Second) // the 2 -> 3 decision
	store := percentageStore(t, "")
	resolve := func(model, ns string) params.Resolved { return store.Resolve(model, ns) }
	cases := []struct {
		name       string
		thirdReady time.Duration // ago
		reporting  map[string]float64
		want       int32
	}{
		{"third Ready 14s ago: the peak predates it", 14 * time.Second, map[string]float64{"p-1": 0.79, "p-2": 0.79, "p-3": 0.53}, 3},
		{"third Ready 14s ago, not scraped yet, the decision older than twice the start-up", 14 * time.Second, map[string]float64{"p-1": 0.79, "p-2": 0.79}, 3},
		{"third Ready 14s ago and short of headroom too: load still rising", 14 * time.Second, map[string]float64{"p-1": 0.79, "p-2": 0.79, "p-3": 0.75}, 4},
		{"third Ready a window ago: 0.79 is load it served with", time.Minute, map[string]float64{"p-1": 0.79, "p-2": 0.79, "p-3": 0.53}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := va("prod", "l4", "llama", "5", 1, 4)
			v.Status.DesiredOptimizedAlloc.NumReplicas = 3
			v.Status.DesiredOptimizedAlloc.LastUpdate = metav1.NewTime(decided)
			v.Status.DesiredOptimizedAlloc.LastRunTime = metav1.NewTime(now.Add(-2 * time.Second))
			target := resolved(3, "p-1", "p-2", "p-3")
			target.StartupDelay = 8 * time.Second
			target.ReadyAt = map[string]time.Time{"p-1": now.Add(-5 * time.Minute), "p-2": now.Add(-5 * time.Minute), "p-3": now.Add(-tc.thirdReady)}
			metrics := collector.Result{Pods: map[collector.PodKey]collector.PodMetrics{},
				Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {{Namespace: "prod", Model: "llama"}: 500}}}
			for pod, kv := range tc.reporting {
				metrics.Pods[collector.PodKey{Namespace: "prod", Pod: pod}] = collector.PodMetrics{KvCacheUsage: kv, HasKvCacheUsage: true, HasQueueLength: true}
			}
			plans := BuildPlans([]View{{VA: v, Target: target}}, metrics, nil, resolve)
			require.Len(t, plans, 1)
			res := Default().Run(now, []GroupInput{plans[0].Input})
			require.Len(t, res[0].Targets, 1)
			assert.Equal(t, tc.want, res[0].Targets[0].Replicas, res[0].Targets[0].Reason)
		})
	}
}

// The Ready times reach the analyzers: each replica's own, and each
// variant's latest.
func TestBuildPlansReadyTimes(t *testing.T) {
	target := resolved(2, "p-1", "p-2")
	target.ReadyAt = map[string]time.Time{"p-1": t0.Add(-time.Hour), "p-2": t0.Add(-time.Second)}
	plans := BuildPlans([]View{{VA: va("prod", "l4", "llama", "5", 1, 4), Target: target}}, collector.Result{Pods: collectedPods("prod", 0.5, "p-1", "p-2")}, nil, defaults)
	require.Len(t, plans, 1)
	g := plans[0].Input.Group
	assert.Equal(t, t0.Add(-time.Second), g.Variants[0].LastReadyAt)
	got := map[string]time.Time{}
	for _, r := range g.Replicas {
		got[r.Pod] = r.ReadyAt
	}
	assert.Equal(t, target.ReadyAt, got)
	assert.Equal(t, time.Minute, decision.MetricsWindow)
}
