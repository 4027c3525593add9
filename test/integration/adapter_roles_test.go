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
	"k8s.io/client-go/kubernetes"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestAdapterPrefillDecodeRoles runs `wva adapter`, with the built-in
// default analyzer (slo-planner) and with the queueing-model analyzer
// (selected by a wva-queueing-model-config entry with latency targets),
// against Prometheus scraping a P/D fleet:
// one prefill and one decode Deployment of the same model, told apart only
// by their pod templates' llm-d.ai/role label. The decode pod is past its
// ITL target at the load it serves, the prefill pod answers its prompts
// fast: the adapter serves a higher wva_desired_replicas for decode and
// keeps prefill, the cheaper variant, at 1.
func TestAdapterPrefillDecodeRoles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		analyzer string
		// queueingConfig, when set, is the wva-queueing-model-config
		// default entry that selects the queueing-model analyzer.
		queueingConfig string
		// reasonPrefix starts the decode variant's decision reason.
		reasonPrefix string
	}{
		{"slo-planner", "", "planned"},
		// Decode's 150 ms ITL is past the 50 ms target (the filter, seeded
		// from it, finds the target missed even at zero load and sizes at
		// utilization 2/3: about 3.5 req/s a replica, under the 6 it
		// gets); prefill's 50 ms TTFT is far under 500 ms.
		{"queueing-model", "tuningEnabled: false\ntargetTTFT: 500\ntargetITL: 50", "scale-up"},
	} {
		t.Run(tc.analyzer, func(t *testing.T) { testAdapterPrefillDecodeRoles(t, tc.analyzer, tc.queueingConfig, tc.reasonPrefix) })
	}
}

func testAdapterPrefillDecodeRoles(t *testing.T, analyzer, queueingConfig, reasonPrefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	if queueingConfig != "" {
		_, err := cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wva-queueing-model-config", Labels: configLabels()},
			Data: map[string]string{"default": queueingConfig}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = "meta/llama-3.1-8b"
	prefill := fakevllm.Pod{Namespace: "prod", Name: "llama-prefill-0", Model: model}
	decode := fakevllm.Pod{Namespace: "prod", Name: "llama-decode-0", Model: model}
	vllm.Set(prefill, 0.05, 0)
	vllm.Set(decode, 0.7, 0)
	// Every request passes through both: the same arrivals on each pod.
	startTraffic(t, vllm, prefill, 6, fakevllm.Request{PromptTokens: 500, OutputTokens: 1, TTFT: 0.05, ITL: 0.001})
	startTraffic(t, vllm, decode, 6, fakevllm.Request{PromptTokens: 500, OutputTokens: 100, TTFT: 0.3, ITL: 0.15})
	roleVariant(ctx, t, cs, "llama-prefill", "prefill", prefill.Name)
	roleVariant(ctx, t, cs, "llama-decode", "decode", decode.Name)
	// Prefill is ten times cheaper: were the roles substitutes, the
	// planner's cheapest mix would add prefill for decode's shortfall.
	for _, va := range []*llmdv1alpha1.VariantAutoscaling{newVA("prod", "llama-prefill", model, "1", 1, 10), newVA("prod", "llama-decode", model, "10", 1, 10)} {
		_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "both pods' arrivals in Prometheus", func() (bool, string) {
		s, err := prom.Query(ctx, `rate(vllm:request_success_total[60s])`)
		return err == nil && len(s) == 2 && s[0].Value > 3 && s[1].Value > 3, fmt_(s, err)
	})
	startAdapterAPIService(ctx, t, cluster, prom.URL)

	served := func(variant string) (int64, error) {
		list, err := getRaw(ctx, cs, "prod", variant)
		if err != nil {
			return 0, err
		}
		if len(list.Items) != 1 {
			return 0, nil
		}
		return list.Items[0].Value.Value(), nil
	}
	testenv.Eventually(ctx, t, "decode scaled up, prefill kept at 1", func() (bool, string) {
		d, derr := served("llama-decode")
		p, perr := served("llama-prefill")
		return derr == nil && perr == nil && d > 1 && p == 1, fmt_([]any{"decode", d, derr, "prefill", p, perr}, nil)
	})
	va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-decode", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(va.Status.DesiredOptimizedAlloc.Reason, reasonPrefix), va.Status.DesiredOptimizedAlloc.Reason)
	assert.Contains(t, va.Status.DesiredOptimizedAlloc.Reason, "decode: "+analyzer+": ", "decided within the decode role")
	t.Logf("decode: %d replicas: %s", va.Status.DesiredOptimizedAlloc.NumReplicas, va.Status.DesiredOptimizedAlloc.Reason)
	// Prefill stays at 1 while decode keeps its scale-up.
	for range 5 {
		p, err := served("llama-prefill")
		require.NoError(t, err)
		assert.Equal(t, int64(1), p)
		time.Sleep(time.Second)
	}
}

// roleVariant is servingVariant with the role label on the Deployment's
// pod template, where llm-d puts it.
func roleVariant(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, role, pod string) {
	t.Helper()
	servingVariant(ctx, t, cs, "prod", name, 1, []string{pod})
	d, err := cs.AppsV1().Deployments("prod").Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Template.Labels[llmdv1alpha1.LabelRole] = role
	_, err = cs.AppsV1().Deployments("prod").Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
}
