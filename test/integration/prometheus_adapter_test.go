package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/engine"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// prometheusAdapterRule is the externalRules entry
// docs/keda-and-prometheus-adapter.md gives prometheus-adapter users.
type prometheusAdapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

func documentedRule(t *testing.T) prometheusAdapterRule {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "keda-and-prometheus-adapter.md"))
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```yaml\n(externalRules:.*?)```").FindSubmatch(doc)
	require.NotNil(t, block, "docs/keda-and-prometheus-adapter.md: no ```yaml block with externalRules")
	var cfg struct {
		ExternalRules []prometheusAdapterRule `json:"externalRules"`
	}
	require.NoError(t, yaml.UnmarshalStrict(block[1], &cfg))
	require.Len(t, cfg.ExternalRules, 1)
	return cfg.ExternalRules[0]
}

// TestPrometheusAdapterRule checks the documented prometheus-adapter rule on
// a real Prometheus scraping the adapter's exported gauges the way the
// ServiceMonitor does (honorLabels, target label namespace=wva-system): the
// discovery query finds the series, and the metrics query, expanded as
// prometheus-adapter expands it for an HPA in namespace prod with selector
// variant_name=llama-l4, returns that one variant's desired replicas under
// the name the HPAs wva creates ask for.
func TestPrometheusAdapterRule(t *testing.T) {
	t.Parallel()
	rule := documentedRule(t)
	assert.Equal(t, "namespace", rule.Resources.Overrides["namespace"].Resource)
	assert.Equal(t, "wva_desired_replicas", regexp.MustCompile(rule.Name.Matches).ReplaceAllString("wva_desired_replicas", rule.Name.As),
		"the name HPAs made by `wva controller` select")

	// The leader adapter's gauges, published as a decision cycle does.
	reg := prometheus.NewRegistry()
	engine.NewMetrics(reg).Publish([]engine.VariantSample{
		{Labels: [4]string{"llama-l4", "prod", "meta/llama", "L4"}, Desired: 3, Current: 2},
		{Labels: [4]string{"llama-h100", "prod", "meta/llama", "H100"}, Desired: 1, Current: 1},
		{Labels: [4]string{"llama-l4", "staging", "meta/llama", "L4"}, Desired: 7, Current: 7},
	}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: wva-adapter
    honor_labels: true
    static_configs:
      - targets: [%q]
        labels:
          namespace: wva-system
          pod: wva-adapter-0
`, lis.Addr().String())
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	testenv.Eventually(ctx, t, "discovery query finds the three variants", func() (bool, string) {
		got, err := prom.Query(ctx, rule.SeriesQuery)
		return err == nil && len(got) == 3, fmt_(got, err)
	})

	// prometheus-adapter's templates use << >> delimiters.
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(rule.MetricsQuery)
	require.NoError(t, err)
	var q strings.Builder
	require.NoError(t, tmpl.Execute(&q, map[string]string{
		"Series": "wva_desired_replicas", "LabelMatchers": `namespace="prod",variant_name="llama-l4"`, "GroupBy": "namespace",
	}))
	got, err := prom.Query(ctx, q.String())
	require.NoError(t, err, q.String())
	require.Len(t, got, 1, q.String())
	assert.InDelta(t, 3.0, got[0].Value, 0)
	assert.Equal(t, "prod", got[0].Metric["namespace"], "the VA's namespace, kept by honorLabels")
	t.Logf("%s -> %v", q.String(), got[0].Value)
}
