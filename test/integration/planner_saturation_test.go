package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// demandIn reads the demand a slo-planner decision's reason names.
var demandIn = regexp.MustCompile(`demand ([0-9.]+) req/s`)

// TestPlannerScalesUpSaturatedReplicas checks the saturation property
// through the adapter, against Debian's Prometheus: four Ready replicas at
// 96% KV cache with 12 requests queued each, served by the default
// slo-planner, are scaled up whatever the rate series say. First there is
// no request series at all (a renamed counter, a scrape gap): demand reads
// as nothing, and the fitted capacity claims room. Then the replicas report
// a trickle of completions, far below what the capacity claims they serve.
func TestPlannerScalesUpSaturatedReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = `meta/llama-3.1-70b`
	var pods []fakevllm.Pod
	var names []string
	for i := range 4 {
		p := fakevllm.Pod{Namespace: "prod", Name: fmt.Sprintf("llama-h100-%d", i), Model: model}
		vllm.Set(p, 0.96, 12)
		pods, names = append(pods, p), append(names, p.Name)
	}
	servingVariant(ctx, t, cs, "prod", "llama-h100", 4, names)
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-h100", model, "20", 1, 8), metav1.CreateOptions{})
	require.NoError(t, err)

	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the four replicas' KV gauges", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc`)
		return err == nil && len(s) == 4, fmt_(s, err)
	})
	// The status is rewritten every few seconds, so its reason names the
	// demand of a recent cycle even while the decision stays the same.
	startAdapterAPIService(ctx, t, cluster, prom.URL, "--status-heartbeat=3s")

	// scaledUp waits for a served target above the four replicas decided
	// on a demand the rate series put in want (its reason names the
	// demand), and returns the target and the reason.
	scaledUp := func(what string, want func(demand float64) bool) (int64, string) {
		var got int64
		var reason string
		testenv.Eventually(ctx, t, what, func() (bool, string) {
			list, err := getRaw(ctx, cs, "prod", "llama-h100")
			if err != nil {
				return false, err.Error()
			}
			if len(list.Items) != 1 {
				return false, fmt_(list.Items, nil)
			}
			got = list.Items[0].Value.Value()
			va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-h100", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			reason = va.Status.DesiredOptimizedAlloc.Reason
			m := demandIn.FindStringSubmatch(reason)
			if m == nil {
				return false, reason
			}
			demand, err := strconv.ParseFloat(m[1], 64)
			return err == nil && want(demand) && got > 4 && va.Status.DesiredOptimizedAlloc.NumReplicas == int32(got),
				fmt.Sprintf("served %d, reason %q", got, reason)
		})
		return got, reason
	}

	t.Run("no request series", func(t *testing.T) {
		s, err := prom.Query(ctx, `vllm:request_success_total`)
		require.NoError(t, err)
		require.Empty(t, s, "the replicas report no request counter")
		n, reason := scaledUp("a scale-up served for four saturated replicas with no rate series",
			func(demand float64) bool { return demand == 0 })
		assert.LessOrEqual(t, n, int64(8), "within maxReplicas")
		assert.Contains(t, reason, "4 of 4 reporting replicas saturated")
	})

	t.Run("a trickle of completions", func(t *testing.T) {
		// 0.5 req/s over the group: far less than four replicas' fitted
		// capacity, which the rates alone would shrink the group to.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				for _, p := range pods {
					vllm.Served(p, 0.25)
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-done })
		testenv.Eventually(ctx, t, "Prometheus has a request rate for every replica", func() (bool, string) {
			s, err := prom.Query(ctx, `rate(vllm:request_success_total[1m]) > 0`)
			return err == nil && len(s) == 4, fmt_(s, err)
		})
		n, reason := scaledUp("a scale-up still served with a demand read from the rate series",
			func(demand float64) bool { return demand > 0 })
		assert.LessOrEqual(t, n, int64(8), "within maxReplicas")
		assert.Contains(t, reason, "reporting replicas saturated")
	})
}
