package integration

import (
	"context"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
)

// TestCollectorAgainstPrometheus runs the collector's real PromQL against
// Debian's Prometheus: new and legacy KV gauge names, namespace filtering,
// and a model ID full of PromQL syntax.
func TestCollectorAgainstPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	current, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(current.Close)
	legacy, err := fakevllm.Start(true)
	require.NoError(t, err)
	t.Cleanup(legacy.Close)

	const evilModel = `evil"} or vector(1) {x="`
	a := fakevllm.Pod{Namespace: "prod", Name: "new-0", Model: "meta/llama"}
	b := fakevllm.Pod{Namespace: "prod", Name: "old-0", Model: "meta/llama"}
	c := fakevllm.Pod{Namespace: "prod", Name: "evil-0", Model: evilModel}
	other := fakevllm.Pod{Namespace: "staging", Name: "new-1", Model: "meta/llama"}
	current.Set(a, 0.42, 3)
	current.Set(c, 0.10, 0)
	current.Set(other, 0.99, 9)
	legacy.Set(b, 0.61, 1)
	current.Served(c, 5)

	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    honor_labels: true\n" +
		"    static_configs:\n      - targets: [\"" + current.Addr + "\", \"" + legacy.Addr + "\"]\n"
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	col := collector.Collector{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}

	var res collector.Result
	eventually(ctx, t, "both exporters scraped", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{time.Minute}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		return len(res.Pods) == 3 && res.Pods[collector.PodKey{Namespace: "prod", Pod: "old-0"}].Reporting(), fmt_(res.Pods, nil)
	})
	assert.Equal(t, 6, res.Queries, "5 metric queries + 1 per retention window")
	assert.Equal(t, 0.42, res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].KvCacheUsage)
	assert.Equal(t, 3.0, res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].QueueLength)
	assert.Equal(t, 0.61, res.Pods[collector.PodKey{Namespace: "prod", Pod: "old-0"}].KvCacheUsage, "legacy gauge name as fallback")
	assert.Equal(t, int64(1000), res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].NumGPUBlocks)
	assert.NotContains(t, res.Pods, collector.PodKey{Namespace: "staging", Pod: "new-1"}, "other namespaces filtered out")

	// The counter's first scrape is its baseline: serve more and wait.
	current.Served(c, 5)
	eventually(ctx, t, "request increase for the evil model ID", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{time.Minute}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		n, _ := res.RequestsOver(time.Minute, collector.ModelKey{Namespace: "prod", Model: evilModel})
		return n > 0, fmt_(res.Requests, nil)
	})
}
