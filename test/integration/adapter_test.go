package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestAdapterEndToEnd runs `wva adapter` registered through a real
// APIService, with Debian's Prometheus scraping a fake vLLM exporter, and
// checks what an operator would: the decided value through `get --raw`, VA
// status, ConfigMap edits, an invalid ConfigMap, and a Prometheus outage.
func TestAdapterEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	var err error

	// Two Ready pods at KV 0.5 that served 10 requests and serve none now:
	// without a ConfigMap the slo-planner, the built-in default, keeps the
	// fleet as found for its first hold: steady at 2.
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	const model = `meta/llama-3.1-8b`
	pods := []fakevllm.Pod{{Namespace: "prod", Name: "llama-l4-0", Model: model}, {Namespace: "prod", Name: "llama-l4-1", Model: model}}
	for _, p := range pods {
		vllm.Set(p, 0.5, 0)
		vllm.Served(p, 10)
	}
	servingVariant(ctx, t, cs, "prod", "llama-l4", 2, []string{"llama-l4-0", "llama-l4-1"})
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", model, "5", 1, 4), metav1.CreateOptions{})
	require.NoError(t, err)

	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	testenv.Eventually(ctx, t, "Prometheus has the vLLM series", func() (bool, string) {
		s, err := prom.Query(ctx, `vllm:kv_cache_usage_perc`)
		return err == nil && len(s) == 2, fmt_(s, err)
	})

	adapter, svc := startAdapterAPIService(ctx, t, cluster, prom.URL)

	served := func(want int64) func() (bool, string) {
		return func() (bool, string) {
			list, err := getRaw(ctx, cs, "prod", "llama-l4")
			if err != nil {
				return false, err.Error()
			}
			if len(list.Items) != 1 {
				return false, fmt_(list.Items, nil)
			}
			return list.Items[0].Value.Value() == want, list.Items[0].Value.String()
		}
	}

	t.Run("get --raw serves the decision of record", func(t *testing.T) {
		testenv.Eventually(ctx, t, "wva_desired_replicas = 2 through the aggregator", served(2))
		va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(2), va.Status.DesiredOptimizedAlloc.NumReplicas)
		assert.Equal(t, int32(2), va.Status.CurrentReplicas)
		assert.True(t, meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable))
		assert.True(t, meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeTargetResolved))
		assert.True(t, meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeOptimizationReady))
		assert.Contains(t, va.Status.DesiredOptimizedAlloc.Reason, "slo-planner: ", "no ConfigMap: the built-in default analyzer")
	})

	t.Run("a renewed serving certificate is served without a restart", func(t *testing.T) {
		before := servingCertSerial(ctx, t, adapter.Port, cluster.CAPEM, svc.ServiceDNSName())
		cert, key, err := cluster.IssueServingCert([]string{svc.ServiceDNSName()}, []net.IP{net.ParseIP("127.0.0.1")})
		require.NoError(t, err)
		block, _ := pem.Decode(cert)
		renewedCert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.NotEqual(t, before.String(), renewedCert.SerialNumber.String())

		// As the kubelet does when cert-manager renews Secret wva-adapter-tls.
		swapped := time.Now()
		require.NoError(t, testenv.WriteSecretVolume(adapter.CertDir, map[string][]byte{"tls.crt": cert, "tls.key": key}))
		// k8s.io/apiserver's DynamicCertKeyPairContent (--tls-cert-file)
		// watches the files with fsnotify and re-reads them every minute
		// regardless: 90 s bounds it with margin for a loaded machine.
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		testenv.Eventually(rctx, t, "new serving certificate in a new TLS handshake", func() (bool, string) {
			got := servingCertSerial(rctx, t, adapter.Port, cluster.CAPEM, svc.ServiceDNSName())
			return got.Cmp(renewedCert.SerialNumber) == 0, got.String()
		})
		t.Logf("renewed serving certificate served %s after the Secret volume swap", time.Since(swapped).Round(100*time.Microsecond))
		testenv.Eventually(ctx, t, "the aggregator still reaches the adapter", served(2))
	})

	t.Run("unknown variant is NotFound", func(t *testing.T) {
		_, err := getRaw(ctx, cs, "prod", "no-such-variant")
		require.Error(t, err)
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	})

	t.Run("a ConfigMap edit changes the next decision", func(t *testing.T) {
		// The percentage analyzer at threshold 0.55: spare KV 0.05 < trigger
		// 0.10 -> scale-up to 3.
		_, err := cs.CoreV1().ConfigMaps("wva-system").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: configLabels()},
			Data:       map[string]string{"default": "analyzerName: saturation-percentage\nkvCacheThreshold: 0.55\nkvSpareTrigger: 0.10"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "wva_desired_replicas = 3 after the ConfigMap edit", served(3))
	})

	t.Run("the adapter exports its own metrics", func(t *testing.T) {
		// The per-cycle series show the latest cycle: with a 1 s interval
		// and cycle timeout, one cycle of a loaded machine can run out of
		// time and hold instead (metrics-unreachable-hold); the next
		// decides again. Wait for a cycle that decided 3 with every
		// query, then read the rest. The scale-up is one cycle's decision:
		// the cycles after it hold it while the target scales
		// (transition-hold), so either is the decision's series.
		perCycle := []string{
			`wva_desired_replicas{accelerator="",model_id="meta/llama-3.1-8b",namespace="prod",variant_name="llama-l4"} 3`,
			"wva_prometheus_queries_per_cycle 16", // 15 vLLM and EPP queries plus one idle window
		}
		decided := []string{
			`wva_variant_decision_info{accelerator="",action="scale-up",model_id="meta/llama-3.1-8b",namespace="prod",rule="scale-up",variant_name="llama-l4"} 1`,
			`wva_variant_decision_info{accelerator="",action="blocked",model_id="meta/llama-3.1-8b",namespace="prod",rule="transition-hold",variant_name="llama-l4"} 1`,
		}
		var body string
		testenv.Eventually(ctx, t, "a cycle that decided 3 with 16 queries", func() (bool, string) {
			b, err := tryGet(ctx, adapter.MetricsURL+"/metrics")
			if err != nil {
				return false, err.Error()
			}
			for _, line := range perCycle {
				if !strings.Contains(b, line) {
					return false, "missing " + line
				}
			}
			if !strings.Contains(b, decided[0]) && !strings.Contains(b, decided[1]) {
				return false, "missing " + decided[0] + " or " + decided[1]
			}
			body = b
			return true, ""
		})
		assert.Contains(t, body, `wva_decisions_total{action="scale-up",rule="scale-up"}`)
		assert.Contains(t, body, "wva_engine_cycle_duration_seconds_count")
		assert.Contains(t, body, "wva_engine_last_success_timestamp_seconds")
		// Present at 0 before any failure, so rate() sees the first one.
		assert.Contains(t, body, `wva_prometheus_query_errors_total{query="kv_cache_usage"} 0`)
		assert.Contains(t, body, `wva_variant_cost{accelerator="",model_id="meta/llama-3.1-8b",namespace="prod",variant_name="llama-l4"} 5`)
		assert.Contains(t, body, `wva_decision_age_seconds{namespace="prod",variant_name="llama-l4"}`)
		assert.Contains(t, body, `wva_external_metric_requests_total{result="ok"}`)
		assert.Contains(t, body, "metrics_apiserver_metric_freshness_seconds")
		assert.Equal(t, "ok", httpGet(ctx, t, adapter.HealthURL+"/readyz"))
		// The leader's engine is cycling: live.
		assert.Equal(t, "ok", httpGet(ctx, t, adapter.HealthURL+"/healthz"))
	})

	t.Run("an invalid ConfigMap is rejected with an Event and the last good config stays", func(t *testing.T) {
		cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, "wva-saturation-scaling-config", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data["default"] = "kvCacheThreshold: 7"
		_, err = cs.CoreV1().ConfigMaps("wva-system").Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "InvalidConfig event", func() (bool, string) {
			evs, err := cs.CoreV1().Events("wva-system").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "InvalidConfig").String()})
			if err != nil || len(evs.Items) == 0 {
				return false, fmt_(nil, err)
			}
			return true, ""
		})
		evs, _ := cs.CoreV1().Events("wva-system").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "InvalidConfig").String()})
		assert.Contains(t, evs.Items[0].Message, "kvCacheThreshold=7: must be in (0, 1]")
		assert.Equal(t, "wva-saturation-scaling-config", evs.Items[0].InvolvedObject.Name)
		// Still deciding with the last good config (0.55): the model is in
		// transition (desired 3, current 2), and 3 keeps being served.
		time.Sleep(3 * time.Second)
		ok, got := served(3)()
		assert.True(t, ok, "served %s", got)
	})

	t.Run("Prometheus outage holds the decision and sets MetricsAvailable=False", func(t *testing.T) {
		prom.Stop()
		testenv.Eventually(ctx, t, "MetricsAvailable=False", func() (bool, string) {
			va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == llmdv1alpha1.ReasonPrometheusError, fmt_(c, nil)
		})
		// Several engine cycles without Prometheus: the value never drops.
		for range 8 {
			ok, got := served(3)()
			require.True(t, ok, "served %s during the outage", got)
			time.Sleep(500 * time.Millisecond)
		}
		require.NoError(t, prom.Start(ctx))
		testenv.Eventually(ctx, t, "MetricsAvailable=True after Prometheus returns", func() (bool, string) {
			va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable), fmt_(va.Status.Conditions, nil)
		})
		ok, got := served(3)()
		assert.True(t, ok, "served %s after recovery", got)
	})
}

// servingCertSerial completes a TLS handshake with the adapter, verifying
// its certificate for serverName against caPEM as the aggregator does, and
// returns the certificate's serial number.
func servingCertSerial(ctx context.Context, t *testing.T, port int, caPEM []byte, serverName string) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
}
