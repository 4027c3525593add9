package integration

import (
	"context"
	"strings"
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

// TestNamespaceLocalConfigMap: a labeled wva-saturation-scaling-config in
// a VA's namespace overrides the global one for that namespace only; an
// unlabeled one is not read (logged once, however often it changes) until
// it gets the label.
func TestNamespaceLocalConfigMap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod", "dev")

	// In each namespace two Ready pods at KV 0.5. With kvCacheThreshold
	// 0.55 the spare KV is 0.05 < trigger 0.10: scale up to 3. With the
	// global 0.80 the spare is 0.30: steady at 2.
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = `meta/llama-3.1-8b`
	for _, ns := range []string{"prod", "dev"} {
		for _, name := range []string{"llama-l4-0", "llama-l4-1"} {
			p := fakevllm.Pod{Namespace: ns, Name: name, Model: model}
			vllm.Set(p, 0.5, 0)
			vllm.Served(p, 10)
		}
		servingVariant(ctx, t, cs, ns, "llama-l4", 2, []string{"llama-l4-0", "llama-l4-1"})
		_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, newVA(ns, "llama-l4", model, "5", 1, 4), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the vLLM series", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc`)
		return err == nil && len(s) == 4, fmt_(s, err)
	})

	// Every entry selects the percentage analyzer: its thresholds are what
	// tell the ConfigMaps apart (the built-in default is the slo-planner).
	const name = "wva-saturation-scaling-config"
	create := func(ns string, labels map[string]string, entry string) {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Data: map[string]string{"default": entry}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("wva-system", configLabels(), "analyzerName: saturation-percentage\nkvCacheThreshold: 0.80\nkvSpareTrigger: 0.10")
	cert, key := adapterServingCert(t, cluster)
	adapter := startAdapter(ctx, t, cluster, prom.URL, cert, key)

	desired := func(ns string) (int32, bool) {
		v, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, "llama-l4", metav1.GetOptions{})
		require.NoError(t, err)
		d := v.Status.DesiredOptimizedAlloc
		return d.NumReplicas, !d.LastRunTime.IsZero()
	}
	decided := func(ns string, want int32) func() (bool, string) {
		return func() (bool, string) {
			n, ran := desired(ns)
			return ran && n == want, fmt_(n, nil)
		}
	}
	testenv.Eventually(ctx, t, "prod steady at 2 with the global ConfigMap", decided("prod", 2))
	testenv.Eventually(ctx, t, "dev steady at 2 with the global ConfigMap", decided("dev", 2))

	// Unlabeled in dev: ignored, logged once even after an edit.
	create("dev", nil, "analyzerName: saturation-percentage\nkvCacheThreshold: 0.55\nkvSpareTrigger: 0.10")
	ignoredLines := func() int {
		n := 0
		for _, l := range strings.Split(adapter.Log(), "\n") {
			if strings.Contains(l, "lacks the label app.kubernetes.io/name=workload-variant-autoscaler") && strings.Contains(l, `"dev/`+name+`"`) {
				n++
			}
		}
		return n
	}
	testenv.Eventually(ctx, t, "the unlabeled ConfigMap is logged", func() (bool, string) { return ignoredLines() == 1, grepLines(adapter.Log(), "lacks the label") })
	cm, err := cs.CoreV1().ConfigMaps("dev").Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["default"] = "analyzerName: saturation-percentage\nkvCacheThreshold: 0.56\nkvSpareTrigger: 0.10"
	_, err = cs.CoreV1().ConfigMaps("dev").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	// Labeled in prod: prod scales up, dev does not. The same informer
	// (one per name, all namespaces) delivered the dev edit before this.
	create("prod", configLabels(), "analyzerName: saturation-percentage\nkvCacheThreshold: 0.55")
	testenv.Eventually(ctx, t, "prod decides 3 with its namespace-local ConfigMap", decided("prod", 3))
	// Let a few more cycles run: dev still decides with the global entry.
	time.Sleep(3 * time.Second)
	n, ran := desired("dev")
	assert.True(t, ran)
	assert.Equal(t, int32(2), n, "dev is not affected by prod's ConfigMap nor by its own unlabeled one")
	assert.Equal(t, 1, ignoredLines(), "one log line per unlabeled ConfigMap, not per update")

	// The label is what was missing: with it, dev's entry applies too.
	cm, err = cs.CoreV1().ConfigMaps("dev").Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Labels = configLabels()
	_, err = cs.CoreV1().ConfigMaps("dev").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	testenv.Eventually(ctx, t, "dev decides 3 once its ConfigMap is labeled", decided("dev", 3))
}
