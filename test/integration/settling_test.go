package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestFreshAdapterAfterScaleUp: a group scaled 2 -> 3 at KV 0.79 reads 0.53
// on each of its 3 Ready pods, the third Ready for a few seconds, while
// Prometheus' 1-minute max_over_time still holds the first two's peak. A
// freshly started adapter (a restart, or a new leader) must decide 3, as
// the adapter that made the scale-up would, not ask for a fourth from the
// peak the third replica answered.
func TestFreshAdapterAfterScaleUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")

	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = "meta/llama-3.1-8b"
	pods := []fakevllm.Pod{{Namespace: "prod", Name: "l4-0", Model: model}, {Namespace: "prod", Name: "l4-1", Model: model}, {Namespace: "prod", Name: "l4-2", Model: model}}
	// The peak on two replicas (the third not serving yet, its KV at 0).
	vllm.Set(pods[0], 0.79, 0)
	vllm.Set(pods[1], 0.79, 0)
	vllm.Set(pods[2], 0, 0)
	for _, p := range pods {
		vllm.Served(p, 100)
	}
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the peak of the first two replicas", func() (bool, string) {
		s, err := prom.Query(ctx, `count(max_over_time(vllm:kv_cache_usage_perc[1m]) >= 0.79)`)
		return err == nil && len(s) == 1 && s[0].Value == 2, fmt_(s, err)
	})

	// The third replica turns Ready: the load spreads over three.
	servingVariant(ctx, t, cs, "prod", "l4", 3, []string{"l4-0", "l4-1", "l4-2"})
	readyAt := map[string]time.Time{"l4-0": time.Now().Add(-10 * time.Minute), "l4-1": time.Now().Add(-10 * time.Minute), "l4-2": time.Now()}
	for name, at := range readyAt {
		p, err := cs.CoreV1().Pods("prod").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
		_, err = cs.CoreV1().Pods("prod").UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	for _, p := range pods {
		vllm.Set(p, 0.53, 0)
	}
	testenv.Eventually(ctx, t, "the third replica reads 0.53 in Prometheus", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc{pod="l4-2"}`)
		return err == nil && len(s) == 1 && s[0].Value == 0.53, fmt_(s, err)
	})

	// The decision of record: 3, made when the peak was seen.
	_, err = cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: configLabels()},
		Data:       map[string]string{"default": "analyzerName: saturation-percentage"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "l4", model, "5", 1, 4), metav1.CreateOptions{})
	require.NoError(t, err)
	decided := metav1.NewTime(time.Now().Add(-20 * time.Second))
	va.Status.DesiredOptimizedAlloc.NumReplicas = 3
	va.Status.DesiredOptimizedAlloc.LastUpdate = decided
	va.Status.DesiredOptimizedAlloc.LastRunTime = decided
	va.Status.DesiredOptimizedAlloc.Reason = "saturation: avg spare KV 0.010 < trigger 0.100"
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").UpdateStatus(ctx, va, metav1.UpdateOptions{})
	require.NoError(t, err)
	peak, err := prom.Query(ctx, `max(max_over_time(vllm:kv_cache_usage_perc{pod=~"l4-0|l4-1"}[1m]))`)
	require.NoError(t, err)
	require.Len(t, peak, 1)
	require.Equal(t, 0.79, peak[0].Value, "the peak is still in the window when the adapter starts")

	cert, key := adapterServingCert(t, cluster)
	startAdapter(ctx, t, cluster, prom.URL, cert, key)
	var reason string
	testenv.Eventually(ctx, t, "the fresh adapter decides", func() (bool, string) {
		got, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "l4", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		a := got.Status.DesiredOptimizedAlloc
		reason = a.Reason
		return a.LastRunTime.After(decided.Time), a.Reason
	})
	// Several cycles within the window: none asks for a fourth.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		got, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "l4", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(3), got.Status.DesiredOptimizedAlloc.NumReplicas, got.Status.DesiredOptimizedAlloc.Reason)
		reason = got.Status.DesiredOptimizedAlloc.Reason
	}
	assert.Contains(t, reason, "settling")
	require.Less(t, time.Since(readyAt["l4-2"]), time.Minute, "the checks ran within the third replica's first metrics window")
}
