package integration

import (
	"context"
	"math"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestCollectorAgainstPrometheus runs the collector's real PromQL against
// Debian's Prometheus: new and legacy KV gauge and ITL histogram names,
// namespace filtering, a model ID full of PromQL syntax, the arrival rate,
// mean TTFT and ITL, the prefix cache hit rate, and the EPP queue (new and deprecated names, no
// namespace label).
func TestCollectorAgainstPrometheus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	// Steady traffic: 4 req/s on new-0 (inter_token_latency), 2 req/s on
	// old-0 (time_per_output_token, the fallback).
	// new-0's requests take 120 ms per output token (prefills stalled
	// them) though its mean token gap is 12 ms.
	// They waited 2.2 s in its queue before they were scheduled.
	startTraffic(t, current, a, 4, fakevllm.Request{PromptTokens: 500, OutputTokens: 100, TTFT: 0.080, ITL: 0.012, TPOT: 0.120, Queue: 2.2, CachedPromptTokens: 200})
	startTraffic(t, legacy, b, 2, fakevllm.Request{PromptTokens: 200, OutputTokens: 50, TTFT: 0.250, ITL: 0.030})
	current.SetEPPQueue("meta/llama", "llama-pool", 6, 6000)
	legacy.SetEPPQueue("meta/llama", "llama-pool", 100, 1) // deprecated name for the same model: ignored
	legacy.SetEPPQueue("other/model", "other-pool", 2, 200)

	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    honor_labels: true\n" +
		"    static_configs:\n      - targets: [\"" + current.Addr + "\", \"" + legacy.Addr + "\"]\n"
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	col := collector.Collector{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}

	var res collector.Result
	testenv.Eventually(ctx, t, "both exporters scraped", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{time.Minute}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		return len(res.Pods) == 3 && res.Pods[collector.PodKey{Namespace: "prod", Pod: "old-0"}].Reporting(), fmt_(res.Pods, nil)
	})
	assert.Equal(t, 16, res.Queries, "15 metric queries + 1 per retention window")
	assert.Equal(t, 0.42, res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].KvCacheUsage)
	assert.Equal(t, 3.0, res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].QueueLength)
	assert.Equal(t, 0.61, res.Pods[collector.PodKey{Namespace: "prod", Pod: "old-0"}].KvCacheUsage, "legacy gauge name as fallback")
	assert.Equal(t, int64(1000), res.Pods[collector.PodKey{Namespace: "prod", Pod: "new-0"}].NumGPUBlocks)
	assert.NotContains(t, res.Pods, collector.PodKey{Namespace: "staging", Pod: "new-1"}, "other namespaces filtered out")

	// The counter's first scrape is its baseline: serve more and wait.
	current.Served(c, 5)
	testenv.Eventually(ctx, t, "request increase for the evil model ID", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{time.Minute}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		n, _ := res.RequestsOver(time.Minute, collector.ModelKey{Namespace: "prod", Model: evilModel})
		return n > 0, fmt_(res.Requests, nil)
	})

	// rate() over the 60s window divides by the whole window: it reads
	// low until a minute of samples exists. The driver runs on a loaded
	// machine, so the rate is checked within 25%; the means are ratios of
	// two rates of the same requests, so they are exact.
	pod := func(name string) collector.PodMetrics {
		return res.Pods[collector.PodKey{Namespace: "prod", Pod: name}]
	}
	testenv.Eventually(ctx, t, "arrival rate of both pods at 4 and 2 req/s within 25%", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		return math.Abs(pod("new-0").ArrivalRate-4) <= 1 && math.Abs(pod("old-0").ArrivalRate-2) <= 0.5, fmt_(res.Pods, nil)
	})
	pa, pb := pod("new-0"), pod("old-0")
	assert.InDelta(t, 80, pa.AvgTTFTms, 0.01, "seconds to ms")
	assert.InDelta(t, 12, pa.AvgITLms, 0.01)
	assert.InDelta(t, 250, pb.AvgTTFTms, 0.01)
	assert.InDelta(t, 30, pb.AvgITLms, 0.01, "legacy ITL histogram as fallback")
	// The TPOT histogram arrives bucket by bucket: every request of new-0
	// over a 100 ms target, at its arrival rate; the legacy exporter has
	// none.
	assert.Equal(t, append(append([]float64(nil), fakevllm.TPOTBuckets...), math.Inf(1)), pa.TPOT.Bounds)
	assert.InDelta(t, 1, pa.TPOT.Above(0.1), 1e-9)
	assert.InDelta(t, 0, pa.TPOT.Above(0.15), 1e-9)
	assert.InDelta(t, pa.ArrivalRate, pa.TPOT.Total(), 1)
	assert.Zero(t, pb.TPOT.Total())
	// The queue-time histogram the same way: every request of new-0
	// waited between 2 and 2.5 s.
	assert.Equal(t, append(append([]float64(nil), fakevllm.QueueBuckets...), math.Inf(1)), pa.QueueTime.Bounds)
	assert.InDelta(t, 1, pa.QueueTime.Above(2), 1e-9)
	assert.InDelta(t, 0, pa.QueueTime.Above(2.5), 1e-9)
	assert.InDelta(t, pa.ArrivalRate, pa.QueueTime.Total(), 1)
	assert.Zero(t, pb.QueueTime.Total())
	// And the TTFT histogram, from both exporters: new-0's requests got
	// their first token in 80 ms, old-0's in 250 ms.
	assert.InDelta(t, 1, pa.TTFT.Above(0.064), 1e-9)
	assert.InDelta(t, 0, pa.TTFT.Above(0.128), 1e-9)
	assert.InDelta(t, pa.ArrivalRate, pa.TTFT.Total(), 1)
	assert.InDelta(t, 1, pb.TTFT.Above(0.128), 1e-9)
	assert.InDelta(t, 0, pb.TTFT.Above(0.256), 1e-9)
	assert.InDelta(t, 500, pa.AvgInputTokens, 0.01)
	assert.InDelta(t, 50, pb.AvgOutputTokens, 0.01)
	// hits / queries of prompt tokens: 200 of 500 cached on new-0, none
	// on old-0 (counters present, hits 0).
	assert.InDelta(t, 0.4, pa.PrefixCacheHitRate, 0.001)
	assert.Equal(t, 0.0, pb.PrefixCacheHitRate)

	// The EPP series have no namespace label: they count for the model in
	// any namespace. Where the new name has the model, the deprecated one
	// is ignored (an EPP exports both); elsewhere it is the fallback.
	assert.Equal(t, collector.EPPQueue{Size: 6, Bytes: 6000}, res.SchedulerQueueFor("prod", "meta/llama"))
	assert.Equal(t, collector.EPPQueue{Size: 2, Bytes: 200}, res.SchedulerQueueFor("staging", "other/model"))
}

// TestCollectorGatewayArrivalsAgainstPrometheus runs the gateway arrival
// query against Debian's Prometheus: the EPP request counter under its v1.0
// name, its pre-v1.0 name, both (only the new one counts), none, and in
// another namespace (the scrape's namespace label, as a PodMonitor on the
// EPP pod gives). It also issues the request-count queries of a thousand
// distinct retention periods, bounded by the idle windows.
func TestCollectorGatewayArrivalsAgainstPrometheus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	eppProd, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(eppProd.Close)
	eppProdOld, err := fakevllm.Start(true)
	require.NoError(t, err)
	t.Cleanup(eppProdOld.Close)
	eppStaging, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(eppStaging.Close)

	startGatewayTraffic(t, eppProd, map[string]float64{"new/model": 4, "both/model": 3})
	startGatewayTraffic(t, eppProdOld, map[string]float64{"old/model": 2, "both/model": 50})
	startGatewayTraffic(t, eppStaging, map[string]float64{"staging/model": 1})

	job := func(name, ns, addr string) string {
		return "  - job_name: " + name + "\n    static_configs:\n      - targets: [\"" + addr + "\"]\n        labels: {namespace: " + ns + "}\n"
	}
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n" +
		job("epp-prod", "prod", eppProd.Addr) + job("epp-prod-old", "prod", eppProdOld.Addr) + job("epp-staging", "staging", eppStaging.Addr)
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	col := collector.Collector{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}

	type arrivals struct {
		rate     float64
		reported bool
	}
	get := func(res collector.Result, ns, model string) arrivals {
		r, ok := res.GatewayArrivalsFor(ns, model)
		return arrivals{r, ok}
	}
	within := func(a arrivals, want, tol float64) bool { return a.reported && math.Abs(a.rate-want) <= tol*want }
	// rate() over 60s reads low until a minute of samples exists; 25%
	// tolerance for a loaded machine.
	var res collector.Result
	testenv.Eventually(ctx, t, "gateway arrivals of every model within 25%", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		return within(get(res, "prod", "new/model"), 4, 0.25) && within(get(res, "prod", "old/model"), 2, 0.25) &&
			within(get(res, "prod", "both/model"), 3, 0.25) && within(get(res, "staging", "staging/model"), 1, 0.25), fmt_(res.GatewayArrivals, nil)
	})
	assert.False(t, get(res, "prod", "silent/model").reported, "no series: not reported")
	assert.False(t, get(res, "prod", "staging/model").reported, "another namespace's EPP series do not count")
	assert.False(t, get(res, "staging", "new/model").reported)
	assert.Less(t, get(res, "prod", "both/model").rate, 10.0, "the old name is ignored where the new one has the model")

	// A thousand distinct retention periods: at most one request-count
	// query per idle window, each accepted by Prometheus.
	var periods []time.Duration
	for i := range 1000 {
		periods = append(periods, time.Minute+time.Duration(i)*97*time.Second)
	}
	res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: periods, Time: time.Now()})
	require.NoError(t, err)
	assert.LessOrEqual(t, res.Queries, 15+len(collector.IdleWindows))
	assert.Len(t, res.Requests, res.Queries-15, "one answer per window queried")
}

// startGatewayTraffic counts requests at the EPP at steady rates (req/s per
// model) until the test ends.
func startGatewayTraffic(t *testing.T, e *fakevllm.Exporter, rates map[string]float64) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				for model, rate := range rates {
					e.GatewayRequests(model, rate*now.Sub(last).Seconds())
				}
				last = now
			}
		}
	}()
}

// TestCollectorMixedEnginesAgainstPrometheus: one group (one model, one
// namespace) served by a vLLM pod, an SGLang pod and an older SGLang pod
// (time_per_output_token ITL). Real Prometheus evaluates the same 15
// queries as for vLLM alone, and every pod gets its own values: KV and
// queue gauges, KV capacity (vLLM's labels, SGLang's pool size in tokens),
// token averages and prefix cache hit rate (SGLang's from its counters),
// TTFT, ITL and arrival rate; the model's request count sums both engines.
func TestCollectorMixedEnginesAgainstPrometheus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	sgl, err := fakevllm.StartSGLang(false)
	require.NoError(t, err)
	t.Cleanup(sgl.Close)
	sglOld, err := fakevllm.StartSGLang(true)
	require.NoError(t, err)
	t.Cleanup(sglOld.Close)

	v := fakevllm.Pod{Namespace: "prod", Name: "vllm-0", Model: "meta/llama"}
	s := fakevllm.Pod{Namespace: "prod", Name: "sglang-0", Model: "meta/llama"}
	o := fakevllm.Pod{Namespace: "prod", Name: "sglang-old-0", Model: "meta/llama"}
	vllm.Set(v, 0.42, 3)
	sgl.Set(s, 0.77, 5)
	sglOld.Set(o, 0.10, 0)
	startTraffic(t, vllm, v, 4, fakevllm.Request{PromptTokens: 500, OutputTokens: 100, TTFT: 0.080, ITL: 0.012, CachedPromptTokens: 200})
	startTraffic(t, sgl, s, 2, fakevllm.Request{PromptTokens: 800, OutputTokens: 40, TTFT: 0.300, ITL: 0.025, CachedPromptTokens: 600})
	startTraffic(t, sglOld, o, 1, fakevllm.Request{PromptTokens: 300, OutputTokens: 60, TTFT: 0.150, ITL: 0.050})

	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: engines\n    honor_labels: true\n" +
		"    static_configs:\n      - targets: [\"" + vllm.Addr + "\", \"" + sgl.Addr + "\", \"" + sglOld.Addr + "\"]\n"
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	col := collector.Collector{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}
	pod := func(res collector.Result, name string) collector.PodMetrics {
		return res.Pods[collector.PodKey{Namespace: "prod", Pod: name}]
	}

	// rate() over 60s reads low until a minute of samples exists: the
	// arrival rates are checked within 25%; the means are ratios of two
	// rates of the same requests, so they are exact.
	var res collector.Result
	testenv.Eventually(ctx, t, "arrival rates 4, 2 and 1 req/s within 25%", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{time.Minute}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		n, _ := res.RequestsOver(time.Minute, collector.ModelKey{Namespace: "prod", Model: "meta/llama"})
		return math.Abs(pod(res, "vllm-0").ArrivalRate-4) <= 1 && math.Abs(pod(res, "sglang-0").ArrivalRate-2) <= 0.5 &&
			math.Abs(pod(res, "sglang-old-0").ArrivalRate-1) <= 0.25 && n > 0, fmt_(res.Pods, nil)
	})
	// increase() is rate() times the range over the same samples: the
	// model's count is the three pods' rates over the minute, both engines.
	n, _ := res.RequestsOver(time.Minute, collector.ModelKey{Namespace: "prod", Model: "meta/llama"})
	assert.InEpsilon(t, 60*(pod(res, "vllm-0").ArrivalRate+pod(res, "sglang-0").ArrivalRate+pod(res, "sglang-old-0").ArrivalRate), n, 1e-6)
	assert.Equal(t, 16, res.Queries, "the same 15 metric queries + 1 per retention window as a vLLM-only fleet")
	assert.Empty(t, res.Dropped)
	assert.Empty(t, res.Warnings)

	tests := []struct {
		pod                      string
		kv, queue                float64
		capacity                 float64
		inTokens, outTokens, hit float64
		ttftMs, itlMs            float64
		blocks, blockSize        int64
	}{
		{"vllm-0", 0.42, 3, fakevllm.KVCapacityTokens, 500, 100, 0.4, 80, 12, 1000, 16},
		{"sglang-0", 0.77, 5, fakevllm.KVCapacityTokens, 800, 40, 0.75, 300, 25, fakevllm.KVCapacityTokens, 1},
		{"sglang-old-0", 0.10, 0, fakevllm.KVCapacityTokens, 300, 60, 0, 150, 50, fakevllm.KVCapacityTokens, 1},
	}
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			rm, ok := res.ReplicaMetrics("prod", tt.pod)
			require.True(t, ok, "reports the saturation inputs")
			assert.Equal(t, tt.kv, rm.KvCacheUsage)
			assert.Equal(t, tt.queue, rm.QueueLength)
			assert.Equal(t, tt.blocks, rm.NumGPUBlocks)
			assert.Equal(t, tt.blockSize, rm.BlockSize)
			assert.Equal(t, tt.capacity, rm.KVCapacityTokens())
			assert.InDelta(t, tt.inTokens, rm.AvgInputTokens, 0.01)
			assert.InDelta(t, tt.outTokens, rm.AvgOutputTokens, 0.01)
			assert.InDelta(t, tt.hit, rm.PrefixCacheHitRate, 0.001)
			assert.InDelta(t, tt.ttftMs, rm.AvgTTFTms, 0.01, "seconds to ms")
			assert.InDelta(t, tt.itlMs, rm.AvgITLms, 0.01)
		})
	}
}
