package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestLastGoodConfigSurvivesRestart: a ConfigMap entry that breaks while
// the adapter runs keeps its last valid version in force, and a restarted
// adapter (a new process with no memory of it) still decides with it,
// read from wva-last-good-config, instead of the built-in defaults. The
// broken entry shows as wva_config_entry_invalid=1 and ConfigValid=False.
func TestLastGoodConfigSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")

	// Two Ready pods at KV 0.5, the percentage analyzer selected by name.
	// With kvCacheThreshold 0.55 the spare KV is 0.05 < trigger 0.10: scale
	// up to 3. With the built-in 0.80 the spare
	// is 0.30 and removing one is unsafe: steady at 2.
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = `meta/llama-3.1-8b`
	for _, p := range []fakevllm.Pod{{Namespace: "prod", Name: "llama-l4-0", Model: model}, {Namespace: "prod", Name: "llama-l4-1", Model: model}} {
		vllm.Set(p, 0.5, 0)
		vllm.Served(p, 10)
	}
	servingVariant(ctx, t, cs, "prod", "llama-l4", 2, []string{"llama-l4-0", "llama-l4-1"})
	createVA := func() {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", model, "5", 1, 4), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createVA()
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the vLLM series", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc`)
		return err == nil && len(s) == 2, fmt_(s, err)
	})

	const valid = "analyzerName: saturation-percentage\nkvCacheThreshold: 0.55\nkvSpareTrigger: 0.10"
	_, err = cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: configLabels()}, Data: map[string]string{"default": valid},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cert, key := adapterServingCert(t, cluster)
	first := startAdapter(ctx, t, cluster, prom.URL, cert, key)

	va := func() *llmdv1alpha1.VariantAutoscaling {
		v, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
		require.NoError(t, err)
		return v
	}
	// Desired 3 on the VA, and the DesiredReplicasChanged Event of this VA
	// (its uid: the VA is recreated below) quotes the spare KV that only
	// 0.55 makes 0.050. The status reason moves on to a transition hold
	// within a cycle; the Event stays.
	decidedWith055 := func() (bool, string) {
		v := va()
		if v.Status.DesiredOptimizedAlloc.NumReplicas != 3 {
			return false, fmt_(v.Status.DesiredOptimizedAlloc, nil)
		}
		evs, err := cs.CoreV1().Events("prod").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.uid", string(v.UID)),
			fields.OneTermEqualSelector("reason", "DesiredReplicasChanged")).String()})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "avg spare KV 0.050 < trigger 0.100") {
				return true, ""
			}
		}
		return false, fmt_(evs.Items, nil)
	}
	testenv.Eventually(ctx, t, "decision with kvCacheThreshold 0.55", decidedWith055)
	persisted := func(want string) func() (bool, string) {
		return func() (bool, string) {
			cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, "wva-last-good-config", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cm.Data["wva-saturation-scaling-config.default"] == want && len(cm.Data) == 1, fmt_(cm.Data, nil)
		}
	}
	testenv.Eventually(ctx, t, "the leader persists the valid entry", persisted(valid))
	cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, "wva-last-good-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "wva", "app.kubernetes.io/managed-by": "wva"}, cm.Labels)

	setEntry := func(text string) {
		cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, "wva-saturation-scaling-config", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data["default"] = text
		_, err = cs.CoreV1().ConfigMaps("wva-system").Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	gauge := func(p *adapterProcess, want string) func() (bool, string) {
		return func() (bool, string) {
			body, err := tryGet(ctx, p.MetricsURL+"/metrics")
			line := `wva_config_entry_invalid{configmap="wva-saturation-scaling-config",key="default"} ` + want
			return err == nil && strings.Contains(body, line), fmt_(grepLines(body, "wva_config_entry_invalid"), err)
		}
	}
	configValid := func(want metav1.ConditionStatus) func() (bool, string) {
		return func() (bool, string) {
			c := meta.FindStatusCondition(va().Status.Conditions, llmdv1alpha1.ConditionTypeConfigValid)
			return c != nil && c.Status == want, fmt_(c, nil)
		}
	}

	setEntry("kvCacheThreshold: 7")
	testenv.Eventually(ctx, t, "wva_config_entry_invalid = 1", gauge(first, "1"))
	testenv.Eventually(ctx, t, "ConfigValid=False", configValid(metav1.ConditionFalse))
	ok, got := persisted(valid)()
	require.True(t, ok, "the broken entry is not persisted: %s", got)

	// A crash and a new process. The VA is recreated so its decision is
	// made afresh (otherwise the held scale-up would read 3 whatever the
	// threshold).
	first.Kill()
	require.NoError(t, wva.LlmdV1alpha1().VariantAutoscalings("prod").Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
	createVA()
	second := startAdapter(ctx, t, cluster, prom.URL, cert, key)
	testenv.Eventually(ctx, t, "the restarted adapter decides with 0.55, not the built-in 0.80", decidedWith055)
	testenv.Eventually(ctx, t, "wva_config_entry_invalid = 1 on the new process", gauge(second, "1"))
	testenv.Eventually(ctx, t, "ConfigValid=False on the recreated VA", configValid(metav1.ConditionFalse))
	c := meta.FindStatusCondition(va().Status.Conditions, llmdv1alpha1.ConditionTypeConfigValid)
	assert.Equal(t, llmdv1alpha1.ReasonInvalidConfig, c.Reason)
	assert.Contains(t, c.Message, `ConfigMap wva-saturation-scaling-config key "default": kvCacheThreshold=7: must be in (0, 1]`)
	ok, got = persisted(valid)()
	assert.True(t, ok, "the new leader keeps the persisted entry: %s", got)

	// Fixed: gauge 0, condition True, the new entry persisted.
	const fixed = "kvCacheThreshold: 0.6\nkvSpareTrigger: 0.10"
	setEntry(fixed)
	testenv.Eventually(ctx, t, "wva_config_entry_invalid = 0", gauge(second, "0"))
	testenv.Eventually(ctx, t, "ConfigValid=True", configValid(metav1.ConditionTrue))
	testenv.Eventually(ctx, t, "the fixed entry is persisted", persisted(fixed))
}

func grepLines(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
