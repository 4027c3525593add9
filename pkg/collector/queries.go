package collector

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/eppqueue"
)

// vLLM metric names (V1 engine). The KV gauge was renamed in vLLM 0.10; the
// old name is queried as a fallback for pods that do not export the new one.
const (
	MetricKvCacheUsage       = "vllm:kv_cache_usage_perc"
	MetricKvCacheUsageLegacy = "vllm:gpu_cache_usage_perc"
	MetricRequestsWaiting    = "vllm:num_requests_waiting"
	MetricCacheConfigInfo    = "vllm:cache_config_info"
	MetricRequestSuccess     = "vllm:request_success_total"
	MetricPromptTokens       = "vllm:request_prompt_tokens"
	MetricGenerationTokens   = "vllm:request_generation_tokens"
	// Prefix cache counters: prompt tokens looked up, and found cached.
	MetricPrefixCacheQueries = "vllm:prefix_cache_queries_total"
	MetricPrefixCacheHits    = "vllm:prefix_cache_hits_total"
	// Latency histograms (seconds). vLLM renamed the per-token latency
	// histogram to inter_token_latency; the old name is the fallback.
	MetricTTFT      = "vllm:time_to_first_token_seconds"
	MetricITL       = "vllm:inter_token_latency_seconds"
	MetricITLLegacy = "vllm:time_per_output_token_seconds"
	// MetricTPOT is the per-request histogram of time per output token
	// (decode time / (output tokens - 1)): the ITL the SLO counts per
	// request, where MetricITL observes every token gap.
	MetricTPOT = "vllm:request_time_per_output_token_seconds"
	// MetricQueueTime is the per-request histogram of the time a request
	// waited before it was first scheduled.
	MetricQueueTime = "vllm:request_queue_time_seconds"
	// SGLang's names (label model_name), from its production metrics page
	// and python/sglang/srt/metrics/collector.py. Its token averages and
	// prefix cache hit rate are ratios of counters incremented once per
	// finished request (prompt, generation and cached tokens, requests);
	// the per-token latency histogram was renamed like vLLM's.
	MetricSGLangTokenUsage       = "sglang:token_usage" // KV pool used, 0..1
	MetricSGLangQueueReqs        = "sglang:num_queue_reqs"
	MetricSGLangMaxTotalTokens   = "sglang:max_total_num_tokens" // KV pool size, tokens
	MetricSGLangRequests         = "sglang:num_requests_total"   // finished requests
	MetricSGLangPromptTokens     = "sglang:prompt_tokens_total"
	MetricSGLangGenerationTokens = "sglang:generation_tokens_total"
	MetricSGLangCachedTokens     = "sglang:cached_tokens_total"
	MetricSGLangTTFT             = "sglang:time_to_first_token_seconds"
	MetricSGLangITL              = "sglang:inter_token_latency_seconds"
	MetricSGLangITLLegacy        = "sglang:time_per_output_token_seconds"
	MetricSGLangTPOT             = "sglang:request_time_per_output_token_seconds"
	// LabelKVTokens marks a cache_config_info sample whose value is the KV
	// capacity in tokens (SGLang's gauge) rather than vLLM's labels.
	LabelKVTokens = "wva_kv_tokens"
	// LabelTargetModelName is the EPP's model after rewrites (what the
	// serving pods see); LabelModelName is the fallback when it is empty.
	LabelTargetModelName = eppqueue.TargetModelLabel
	// LabelModelName is vLLM's served model name, matched to a VA's modelID.
	LabelModelName = "model_name"
)

// Labels names the Prometheus labels that carry a series' Kubernetes pod and
// namespace; they depend on the scrape configuration (PodMonitor relabeling
// gives "namespace" and "pod").
type Labels struct {
	Namespace string
	Pod       string
}

// DefaultLabels matches the Prometheus Operator's PodMonitor/ServiceMonitor.
func DefaultLabels() Labels { return Labels{Namespace: "namespace", Pod: "pod"} }

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate rejects label names PromQL would not parse.
func (l Labels) Validate() error {
	for field, v := range map[string]string{"namespace label": l.Namespace, "pod label": l.Pod} {
		if !labelNameRE.MatchString(v) {
			return fmt.Errorf("%s %q is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)", field, v)
		}
	}
	return nil
}

// RateWindow is the range of the arrival-rate and latency queries: the
// design's 1m, long enough for two samples at a 30s scrape interval. The
// three share it so the tuner sees rate and latencies over the same period;
// the slo-planner reads it as how soon demand is seen (decision.RateWindow).
const RateWindow = decision.RateWindow

// Query names.
const (
	QueryKvCacheUsage    = "kv_cache_usage"
	QueryQueueLength     = "queue_length"
	QueryCacheConfigInfo = "cache_config_info"
	QueryAvgInputTokens  = "avg_input_tokens"
	QueryAvgOutputTokens = "avg_output_tokens"
	QueryPrefixCacheHit  = "prefix_cache_hit_rate"
	QueryArrivalRate     = "arrival_rate"
	QueryAvgTTFT         = "avg_ttft"
	QueryAvgITL          = "avg_itl"
	QueryTPOTBuckets     = "tpot_buckets"
	QueryQueueBuckets    = "queue_time_buckets"
	QueryTTFTBuckets     = "ttft_buckets"
	QueryEPPQueueSize    = "scheduler_queue_size"
	QueryEPPQueueBytes   = "scheduler_queue_bytes"
	QueryGatewayArrivals = "gateway_arrival_rate"
	QueryRequestCount    = "request_count"
)

// IdleWindows are the request-count windows idle detection can use. A
// retention period is rounded up to the first that covers it (one longer
// than the last uses the last), so the collector runs at most
// len(IdleWindows) request-count queries whatever the configured periods.
// Rounding up never sends a model to zero sooner than its period asks.
var IdleWindows = []time.Duration{
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
}

// IdleWindow is the window idle detection uses for a retention period: the
// shortest of IdleWindows at least as long, else the longest. It is 0 for a
// period of 0 or less (no window).
func IdleWindow(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	for _, w := range IdleWindows {
		if period <= w {
			return w
		}
	}
	return IdleWindows[len(IdleWindows)-1]
}

// Query is one named PromQL expression of a collection cycle.
type Query struct {
	Name string
	Expr string
	// Window is set on request-count queries: the increase() range.
	Window time.Duration
}

// Queries builds the cycle's queries: 13, plus one request count per
// distinct IdleWindow of the retention periods given (at most
// len(IdleWindows)). Their number never depends on how many models or pods
// there are, nor on which engines (vLLM, SGLang) serve them: results are grouped by namespace and pod (or model) and split
// per variant group in Go.
func Queries(labels Labels, namespaces []string, windows []time.Duration) []Query {
	sel := selector(labels, namespaces)
	byPod := labels.Namespace + ", " + labels.Pod
	rw := promDuration(RateWindow)
	// The saturation gauges' window: the analyzers' settling after a
	// scale-up lasts as long (decision.MetricsWindow).
	mw := promDuration(decision.MetricsWindow)
	// Each signal is one query whatever the engines: `or` adds SGLang's
	// series (and each engine's older names) per pod where vLLM's current
	// name has none, so a group mixing engines costs no extra query.
	gauge := func(metric string) string {
		return fmt.Sprintf("max by (%s) (max_over_time(%s%s[%s]))", byPod, metric, sel, mw)
	}
	qs := []Query{
		{Name: QueryKvCacheUsage, Expr: either(gauge(MetricKvCacheUsage), gauge(MetricKvCacheUsageLegacy), gauge(MetricSGLangTokenUsage))},
		{Name: QueryQueueLength, Expr: either(gauge(MetricRequestsWaiting), gauge(MetricSGLangQueueReqs))},
		// vLLM's capacity is in the labels; SGLang's gauge value is the
		// pool size in tokens, marked so the collector reads the value.
		{Name: QueryCacheConfigInfo, Expr: either(
			fmt.Sprintf("max by (%s, num_gpu_blocks, block_size) (%s%s)", byPod, MetricCacheConfigInfo, sel),
			fmt.Sprintf(`label_replace(max by (%s) (%s%s), "%s", "value", "", "")`, byPod, MetricSGLangMaxTotalTokens, sel, LabelKVTokens))},
		{Name: QueryAvgInputTokens, Expr: either(histogramMean(byPod, MetricPromptTokens, sel, "5m"),
			rateRatio(byPod, MetricSGLangPromptTokens, MetricSGLangRequests, sel, "5m"))},
		{Name: QueryAvgOutputTokens, Expr: either(histogramMean(byPod, MetricGenerationTokens, sel, "5m"),
			rateRatio(byPod, MetricSGLangGenerationTokens, MetricSGLangRequests, sel, "5m"))},
		// Share of prompt tokens found in the prefix cache (they need no
		// prefill), over the same 5m as the token averages.
		{Name: QueryPrefixCacheHit, Expr: either(rateRatio(byPod, MetricPrefixCacheHits, MetricPrefixCacheQueries, sel, "5m"),
			rateRatio(byPod, MetricSGLangCachedTokens, MetricSGLangPromptTokens, sel, "5m"))},
		// Completions per second stand for arrivals: in steady state they
		// are equal, every engine exports the counter with the pod's
		// namespace, and the EPP's per-pod dispatch counter has no
		// namespace label to join on.
		{Name: QueryArrivalRate, Expr: either(
			fmt.Sprintf("sum by (%s) (rate(%s%s[%s]))", byPod, MetricRequestSuccess, sel, rw),
			fmt.Sprintf("sum by (%s) (rate(%s%s[%s]))", byPod, MetricSGLangRequests, sel, rw))},
		{Name: QueryAvgTTFT, Expr: either(histogramMean(byPod, MetricTTFT, sel, rw), histogramMean(byPod, MetricSGLangTTFT, sel, rw))},
		{Name: QueryAvgITL, Expr: either(histogramMean(byPod, MetricITL, sel, rw), histogramMean(byPod, MetricITLLegacy, sel, rw),
			histogramMean(byPod, MetricSGLangITL, sel, rw), histogramMean(byPod, MetricSGLangITLLegacy, sel, rw))},
		// Each pod's per-request TPOT histogram (its buckets' rates):
		// the share of requests over the ITL target is read in Go, so
		// the query does not depend on any group's SLO.
		{Name: QueryTPOTBuckets, Expr: either(
			fmt.Sprintf("sum by (%s, le) (rate(%s_bucket%s[%s]))", byPod, MetricTPOT, sel, rw),
			fmt.Sprintf("sum by (%s, le) (rate(%s_bucket%s[%s]))", byPod, MetricSGLangTPOT, sel, rw))},
		// Each pod's per-request queue-time histogram the same way:
		// requests that waited past the TTFT target miss it whatever
		// their ITL (vLLM; SGLang exports no per-request queue time).
		{Name: QueryQueueBuckets, Expr: fmt.Sprintf("sum by (%s, le) (rate(%s_bucket%s[%s]))", byPod, MetricQueueTime, sel, rw)},
		// And its TTFT histogram: the share over the TTFT target tells the
		// variants that prefill the traffic's prompts in time from those
		// that do not.
		{Name: QueryTTFTBuckets, Expr: either(
			fmt.Sprintf("sum by (%s, le) (rate(%s_bucket%s[%s]))", byPod, MetricTTFT, sel, rw),
			fmt.Sprintf("sum by (%s, le) (rate(%s_bucket%s[%s]))", byPod, MetricSGLangTTFT, sel, rw))},
		// The EPP exports no namespace label of its own: the scrape's
		// namespace label (the EPP pod's) is kept when present, and no
		// namespace selector applies (the EPP may run elsewhere).
		{Name: QueryEPPQueueSize, Expr: eppModelSum(labels.Namespace, eppqueue.Metric, eppqueue.LegacyMetric)},
		{Name: QueryEPPQueueBytes, Expr: eppModelSum(labels.Namespace, eppqueue.BytesMetric, eppqueue.LegacyBytesMetric)},
		{Name: QueryGatewayArrivals, Expr: eppModelSum(labels.Namespace,
			fmt.Sprintf("rate(%s[%s])", eppqueue.RequestsMetric, rw), fmt.Sprintf("rate(%s[%s])", eppqueue.LegacyRequestsMetric, rw))},
	}
	rounded := make([]time.Duration, 0, len(windows))
	for _, w := range windows {
		rounded = append(rounded, IdleWindow(w))
	}
	for _, w := range dedupe(rounded) {
		// The `or` is inside the sum: a model served by a vLLM and an
		// SGLang variant counts both pods' requests.
		qs = append(qs, Query{Name: QueryRequestCount, Window: w, Expr: fmt.Sprintf(
			"sum by (%[1]s, %[2]s) (increase(%[3]s%[5]s[%[6]s]) or increase(%[4]s%[5]s[%[6]s]))",
			labels.Namespace, LabelModelName, MetricRequestSuccess, MetricSGLangRequests, sel, promDuration(w))})
	}
	return qs
}

// histogramMean is a histogram's mean observation per pod over window (NaN
// for a pod that observed nothing).
func histogramMean(byPod, histogram, sel, window string) string {
	return rateRatio(byPod, histogram+"_sum", histogram+"_count", sel, window)
}

// rateRatio divides two counters' rates per pod over window (NaN for a pod
// whose denominator did not move).
func rateRatio(byPod, num, den, sel, window string) string {
	return fmt.Sprintf("sum by (%[1]s) (rate(%[2]s%[4]s[%[5]s])) / sum by (%[1]s) (rate(%[3]s%[4]s[%[5]s]))", byPod, num, den, sel, window)
}

// either joins per-pod expressions with `or`: a pod's series come from the
// first expression that has it (PromQL's `or` binds loosest).
func either(exprs ...string) string { return strings.Join(exprs, " or ") }

// eppModelSum sums an EPP expression per model; `or` keeps the new name's
// series and adds the deprecated name's only where the new one is absent
// (same namespace and model labels), so an EPP exporting both is not
// counted twice.
func eppModelSum(nsLabel, expr, legacy string) string {
	by := fmt.Sprintf("%s, %s, %s", nsLabel, LabelTargetModelName, LabelModelName)
	return fmt.Sprintf("sum by (%[1]s) (%[2]s) or sum by (%[1]s) (%[3]s)", by, expr, legacy)
}

// selector restricts series to the namespaces that hold VAs.
func selector(labels Labels, namespaces []string) string {
	if len(namespaces) == 0 {
		return ""
	}
	return "{" + NamespaceMatcher(labels, namespaces) + "}"
}

// NamespaceMatcher is the label matcher of the given namespaces ("" for
// none). Namespace names are regexp-quoted and then string-quoted, so no
// value can change the query.
func NamespaceMatcher(labels Labels, namespaces []string) string {
	if len(namespaces) == 0 {
		return ""
	}
	ns := append([]string(nil), namespaces...)
	sort.Strings(ns)
	parts := make([]string, 0, len(ns))
	for _, n := range ns {
		parts = append(parts, regexp.QuoteMeta(n))
	}
	return fmt.Sprintf("%s=~%s", labels.Namespace, QuoteLabelValue(strings.Join(parts, "|")))
}

// QuoteLabelValue quotes a label value for PromQL, which uses Go's string
// escaping rules.
func QuoteLabelValue(v string) string { return strconv.Quote(v) }

// promDuration renders a duration in whole seconds, which PromQL accepts for
// any value ("600s").
func promDuration(d time.Duration) string {
	s := int64(d / time.Second)
	if s < 1 {
		s = 1
	}
	return fmt.Sprintf("%ds", s)
}

func dedupe(ds []time.Duration) []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, d := range ds {
		if d > 0 && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
