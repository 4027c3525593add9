package collector

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// fakeQuerier answers by query-name substring; unit tests only (the real
// Prometheus is exercised in test/integration).
type fakeQuerier struct {
	answers map[string]model.Vector
	fail    string
	seen    []string
}

func (f *fakeQuerier) Query(_ context.Context, q string, _ time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	f.seen = append(f.seen, q)
	if f.fail != "" && strings.Contains(q, f.fail) {
		return nil, nil, nil, errors.New("connection refused")
	}
	for metric, vec := range f.answers {
		if strings.Contains(q, metric) {
			return vec, nil, nil, nil
		}
	}
	return model.Vector{}, nil, nil, nil
}

func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

func TestQueriesAreConstantInNumberAndEscaped(t *testing.T) {
	few := Queries(DefaultLabels(), []string{"prod"}, []time.Duration{10 * time.Minute})
	many := Queries(DefaultLabels(), []string{"a", "b", "c", "d"}, []time.Duration{10 * time.Minute, 10 * time.Minute})
	assert.Len(t, few, 16)
	assert.Len(t, many, 16, "same number of queries whatever the number of namespaces or models")
	assert.Len(t, Queries(DefaultLabels(), nil, []time.Duration{5 * time.Minute, 10 * time.Minute}), 17, "one more per distinct window")

	evil := `prod"}) or vector(1) #`
	q := Queries(DefaultLabels(), []string{evil, "x.y"}, nil)[1].Expr
	assert.Contains(t, q, `{namespace=~"prod\"\\}\\) or vector\\(1\\) #|x\\.y"}`)
	assert.NotContains(t, q, `"}) or vector(1)`)

	kv := few[0].Expr
	assert.Contains(t, kv, "vllm:kv_cache_usage_perc")
	assert.Contains(t, kv, "or max by (namespace, pod) (max_over_time(vllm:gpu_cache_usage_perc")
	assert.Contains(t, few[15].Expr, "increase(vllm:request_success_total{namespace=~\"prod\"}[600s])")
}

func TestIdleWindow(t *testing.T) {
	cases := []struct {
		period, want time.Duration
	}{
		{0, 0},
		{time.Minute, time.Minute},
		{61 * time.Second, 2 * time.Minute},
		{3 * time.Minute, 5 * time.Minute},
		{10 * time.Minute, 10 * time.Minute},
		{10*time.Minute + time.Second, 15 * time.Minute},
		{45 * time.Minute, time.Hour},
		{7 * time.Hour, 12 * time.Hour},
		{30 * time.Hour, 7 * 24 * time.Hour},
		{30 * 24 * time.Hour, 7 * 24 * time.Hour},
	}
	for _, tc := range cases {
		got := IdleWindow(tc.period)
		assert.Equal(t, tc.want, got, "period %s", tc.period)
		if tc.period > 0 && tc.period <= IdleWindows[len(IdleWindows)-1] {
			assert.GreaterOrEqual(t, got, tc.period, "rounded up: never idle sooner than asked")
		}
	}
}

// One request-count query per distinct retention period would make the
// cycle's queries grow with the models (1,010 for 1,000 models each with
// its own period). Rounded to IdleWindows, they stay bounded.
func TestRequestCountQueriesBoundedWhateverThePeriods(t *testing.T) {
	var periods []time.Duration
	for i := range 1000 {
		periods = append(periods, time.Minute+time.Duration(i)*37*time.Second)
	}
	periods = append(periods, 20*time.Hour, 90*24*time.Hour)
	qs := Queries(DefaultLabels(), []string{"prod"}, periods)
	windows := map[time.Duration]bool{}
	for _, q := range qs {
		if q.Name == QueryRequestCount {
			windows[q.Window] = true
			assert.Contains(t, q.Expr, "["+promDuration(q.Window)+"]")
		}
	}
	assert.Len(t, qs, 15+len(IdleWindows), "15 metric queries + at most one per idle window")
	assert.Len(t, windows, len(IdleWindows))
	for w := range windows {
		assert.Contains(t, IdleWindows, w)
	}

	// Collect answers every period through its rounded window.
	fq := &fakeQuerier{answers: map[string]model.Vector{"increase(vllm:request_success_total": {sample(7, "namespace", "prod", "model_name", "m")}}}
	res, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(), Request{RetentionWindows: periods, Time: time.Now()})
	require.NoError(t, err)
	assert.Equal(t, 15+len(IdleWindows), res.Queries)
	assert.Len(t, fq.seen, 15+len(IdleWindows))
	n, ok := res.RequestsOver(3*time.Minute+17*time.Second, ModelKey{"prod", "m"})
	assert.True(t, ok, "a period is read through its idle window")
	assert.Equal(t, 7.0, n)
}

func TestQueryExpressions(t *testing.T) {
	byName := map[string]string{}
	for _, q := range Queries(Labels{Namespace: "ns", Pod: "pod_name"}, []string{"prod"}, []time.Duration{10 * time.Minute}) {
		byName[q.Name] = q.Expr
	}
	sglang := func(num, den, window string) string {
		return ` or sum by (ns, pod_name) (rate(sglang:` + num + `{ns=~"prod"}[` + window + `])) / sum by (ns, pod_name) (rate(sglang:` + den + `{ns=~"prod"}[` + window + `]))`
	}
	tests := []struct {
		query string
		want  []string
		not   []string
	}{
		{QueryArrivalRate, []string{`sum by (ns, pod_name) (rate(vllm:request_success_total{ns=~"prod"}[60s])) or ` +
			`sum by (ns, pod_name) (rate(sglang:num_requests_total{ns=~"prod"}[60s]))`}, nil},
		{QueryKvCacheUsage, []string{`max by (ns, pod_name) (max_over_time(vllm:kv_cache_usage_perc{ns=~"prod"}[`,
			`or max by (ns, pod_name) (max_over_time(vllm:gpu_cache_usage_perc{ns=~"prod"}[`,
			`or max by (ns, pod_name) (max_over_time(sglang:token_usage{ns=~"prod"}[`}, nil},
		{QueryQueueLength, []string{`max by (ns, pod_name) (max_over_time(vllm:num_requests_waiting{ns=~"prod"}[`,
			`or max by (ns, pod_name) (max_over_time(sglang:num_queue_reqs{ns=~"prod"}[`}, nil},
		{QueryCacheConfigInfo, []string{`max by (ns, pod_name, num_gpu_blocks, block_size) (vllm:cache_config_info{ns=~"prod"}) or ` +
			`label_replace(max by (ns, pod_name) (sglang:max_total_num_tokens{ns=~"prod"}), "wva_kv_tokens", "value", "", "")`}, nil},
		{QueryAvgOutputTokens, []string{`rate(vllm:request_generation_tokens_sum{ns=~"prod"}[5m])`,
			sglang("generation_tokens_total", "num_requests_total", "5m")}, nil},
		{QueryRequestCount, []string{`sum by (ns, model_name) (increase(vllm:request_success_total{ns=~"prod"}[600s]) or ` +
			`increase(sglang:num_requests_total{ns=~"prod"}[600s]))`}, nil},
		{QueryAvgTTFT, []string{
			`sum by (ns, pod_name) (rate(vllm:time_to_first_token_seconds_sum{ns=~"prod"}[60s])) / ` +
				`sum by (ns, pod_name) (rate(vllm:time_to_first_token_seconds_count{ns=~"prod"}[60s]))`,
			sglang("time_to_first_token_seconds_sum", "time_to_first_token_seconds_count", "60s")}, nil},
		{QueryAvgITL, []string{
			`(rate(vllm:inter_token_latency_seconds_sum{ns=~"prod"}[60s])) / sum by (ns, pod_name) (rate(vllm:inter_token_latency_seconds_count{ns=~"prod"}[60s])) or `,
			`(rate(vllm:time_per_output_token_seconds_sum{ns=~"prod"}[60s])) / sum by (ns, pod_name) (rate(vllm:time_per_output_token_seconds_count{ns=~"prod"}[60s]))`,
			sglang("inter_token_latency_seconds_sum", "inter_token_latency_seconds_count", "60s"),
			sglang("time_per_output_token_seconds_sum", "time_per_output_token_seconds_count", "60s")}, nil},
		{QueryTPOTBuckets, []string{
			`sum by (ns, pod_name, le) (rate(vllm:request_time_per_output_token_seconds_bucket{ns=~"prod"}[60s])) or ` +
				`sum by (ns, pod_name, le) (rate(sglang:request_time_per_output_token_seconds_bucket{ns=~"prod"}[60s]))`}, nil},
		{QueryEPPQueueSize, []string{
			"sum by (ns, target_model_name, model_name) (llm_d_epp_flow_control_queue_size) or " +
				"sum by (ns, target_model_name, model_name) (inference_extension_flow_control_queue_size)"},
			[]string{`ns=~`}},
		{QueryEPPQueueBytes, []string{"(llm_d_epp_flow_control_queue_bytes) or ", "(inference_extension_flow_control_queue_bytes)"}, []string{`ns=~`}},
		{QueryAvgInputTokens, []string{`rate(vllm:request_prompt_tokens_sum{ns=~"prod"}[5m])`,
			sglang("prompt_tokens_total", "num_requests_total", "5m")}, nil},
		{QueryPrefixCacheHit, []string{
			`sum by (ns, pod_name) (rate(vllm:prefix_cache_hits_total{ns=~"prod"}[5m])) / ` +
				`sum by (ns, pod_name) (rate(vllm:prefix_cache_queries_total{ns=~"prod"}[5m]))`,
			sglang("cached_tokens_total", "prompt_tokens_total", "5m")}, nil},
		{QueryGatewayArrivals, []string{
			"sum by (ns, target_model_name, model_name) (rate(inference_objective_request_total[60s])) or " +
				"sum by (ns, target_model_name, model_name) (rate(inference_model_request_total[60s]))"},
			[]string{`ns=~`}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			expr, ok := byName[tt.query]
			require.True(t, ok, "query %s missing", tt.query)
			for _, w := range tt.want {
				assert.Contains(t, expr, w)
			}
			for _, n := range tt.not {
				assert.NotContains(t, expr, n, "the EPP series have no namespace to select on")
			}
		})
	}
}

func TestLabelsValidate(t *testing.T) {
	require.NoError(t, DefaultLabels().Validate())
	assert.ErrorContains(t, Labels{Namespace: "kubernetes_namespace", Pod: "pod-name"}.Validate(), `pod label "pod-name"`)
}

func TestCollect(t *testing.T) {
	fq := &fakeQuerier{answers: map[string]model.Vector{
		"kv_cache_usage_perc": {
			sample(0.5, "namespace", "prod", "pod", "a"),
			sample(1.5, "namespace", "prod", "pod", "bad-kv"),
			sample(math.NaN(), "namespace", "prod", "pod", "nan-kv"),
			sample(0.2, "namespace", "prod"), // no pod label
		},
		"num_requests_waiting": {sample(3, "namespace", "prod", "pod", "a"), sample(-1, "namespace", "prod", "pod", "neg")},
		"cache_config_info": {
			sample(1, "namespace", "prod", "pod", "a", "num_gpu_blocks", "1000", "block_size", "16"),
			sample(1, "namespace", "prod", "pod", "b", "num_gpu_blocks", "lots", "block_size", "16"),
		},
		"request_prompt_tokens":     {sample(512, "namespace", "prod", "pod", "a"), sample(math.NaN(), "namespace", "prod", "pod", "idle")},
		"request_generation_tokens": {sample(128, "namespace", "prod", "pod", "a")},
		"prefix_cache_hits_total": {sample(0.25, "namespace", "prod", "pod", "a"), sample(1.5, "namespace", "prod", "pod", "bad-hit"),
			sample(math.NaN(), "namespace", "prod", "pod", "no-lookups")},
		"request_success_total": {sample(42, "namespace", "prod", "model_name", "meta/llama"), sample(math.Inf(1), "namespace", "prod", "model_name", "x")},
	}}
	c := Collector{API: fq, Labels: DefaultLabels()}
	res, err := c.Collect(context.Background(), Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{10 * time.Minute}, Time: time.Now()})
	require.NoError(t, err)
	assert.Equal(t, 16, res.Queries)
	assert.Len(t, fq.seen, 16)
	a := res.Pods[PodKey{"prod", "a"}]
	assert.True(t, a.Reporting())
	assert.Equal(t, 0.5, a.KvCacheUsage)
	assert.Equal(t, 3.0, a.QueueLength)
	assert.Equal(t, int64(1000), a.NumGPUBlocks)
	assert.Equal(t, int64(16), a.BlockSize)
	assert.Equal(t, 512.0, a.AvgInputTokens)
	assert.Equal(t, 128.0, a.AvgOutputTokens)
	assert.Equal(t, 0.25, a.PrefixCacheHitRate)
	assert.NotContains(t, res.Pods, PodKey{"prod", "bad-hit"}, "a hit rate above 1 is a bad sample")
	assert.NotContains(t, res.Pods, PodKey{"prod", "no-lookups"}, "0/0 hit rate is no data")
	assert.NotContains(t, res.Pods, PodKey{"prod", "bad-kv"})
	assert.NotContains(t, res.Pods, PodKey{"prod", "idle"}, "0/0 token average is no data, not a pod")
	// The arrival-rate query reads the same counter; its per-model samples
	// have no pod label.
	assert.Equal(t, map[Drop]int{
		{QueryKvCacheUsage, ReasonAboveMax}: 1, {QueryKvCacheUsage, ReasonNotFinite}: 1, {QueryKvCacheUsage, ReasonNoTarget}: 1,
		{QueryQueueLength, ReasonNegative}: 1, {QueryCacheConfigInfo, ReasonBadLabels}: 1, {QueryRequestCount, ReasonNotFinite}: 1,
		{QueryArrivalRate, ReasonNoTarget}: 1, {QueryArrivalRate, ReasonNotFinite}: 1, {QueryPrefixCacheHit, ReasonAboveMax}: 1,
	}, res.Dropped)
	assert.Len(t, res.DroppedSamples, 9)

	n, ok := res.RequestsOver(10*time.Minute, ModelKey{"prod", "meta/llama"})
	assert.True(t, ok)
	assert.Equal(t, 42.0, n)
	_, ok = res.RequestsOver(10*time.Minute, ModelKey{"prod", "silent/model"})
	assert.False(t, ok, "no series is unknown, not zero requests")
	_, ok = res.RequestsOver(5*time.Minute, ModelKey{"prod", "meta/llama"})
	assert.False(t, ok, "window not queried")
}

// A pod's TPOT buckets become its histogram: sorted by le, cumulative
// counts kept monotone, dropped without a +Inf bucket or observations;
// bad buckets are counted as dropped samples.
func TestCollectTPOTBuckets(t *testing.T) {
	pod := func(name string) []string { return []string{"namespace", "prod", "pod", name} }
	bucket := func(v float64, pod []string, le string) *model.Sample {
		return sample(v, append(append([]string(nil), pod...), "le", le)...)
	}
	inf := math.Inf(1)
	tests := []struct {
		name    string
		buckets model.Vector
		want    decision.Histogram
		over    float64 // share above 100 ms
		dropped map[Drop]int
	}{
		{"sorted by le", model.Vector{bucket(4, pod("p"), "+Inf"), bucket(1, pod("p"), "0.05"), bucket(3, pod("p"), "0.1")},
			decision.Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{1, 3, 4}}, 0.25, nil},
		{"a dip from scrape timing is evened out", model.Vector{bucket(2, pod("p"), "0.05"), bucket(1.9, pod("p"), "0.1"), bucket(2, pod("p"), "+Inf")},
			decision.Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{2, 2, 2}}, 0, nil},
		{"no +Inf bucket: no histogram", model.Vector{bucket(1, pod("p"), "0.05"), bucket(3, pod("p"), "0.1")}, decision.Histogram{}, 0, nil},
		{"nothing observed: no histogram", model.Vector{bucket(0, pod("p"), "0.1"), bucket(0, pod("p"), "+Inf")}, decision.Histogram{}, 0, nil},
		{"bad le and negative rate are dropped", model.Vector{bucket(1, pod("p"), "0.1"), bucket(2, pod("p"), "+Inf"), bucket(1, pod("p"), "soon"),
			bucket(-1, pod("p"), "0.2")},
			decision.Histogram{Bounds: []float64{0.1, inf}, Counts: []float64{1, 2}}, 0.5,
			map[Drop]int{{QueryTPOTBuckets, ReasonBadLabels}: 1, {QueryTPOTBuckets, ReasonNegative}: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fq := &fakeQuerier{answers: map[string]model.Vector{
				"request_time_per_output_token_seconds_bucket": tt.buckets,
				"kv_cache_usage_perc":                          {sample(0.3, pod("p")...)},
				"num_requests_waiting":                         {sample(0, pod("p")...)},
			}}
			res, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(), Request{Time: time.Now()})
			require.NoError(t, err)
			rm, ok := res.ReplicaMetrics("prod", "p")
			require.True(t, ok)
			assert.Equal(t, tt.want, rm.TPOT)
			assert.InDelta(t, tt.over, rm.TPOT.Above(0.1), 1e-9)
			if tt.dropped == nil {
				assert.Empty(t, res.Dropped)
				return
			}
			assert.Equal(t, tt.dropped, res.Dropped)
		})
	}
}

// SGLang's KV capacity is a gauge's value, not labels: the query marks its
// samples, and the collector reads the value as blocks of one token.
func TestCollectSGLangKVCapacity(t *testing.T) {
	tests := []struct {
		name         string
		sample       *model.Sample
		blocks, size int64
		dropped      string
	}{
		{"SGLang pool size in tokens", sample(16384, "namespace", "prod", "pod", "p", LabelKVTokens, "value"), 16384, 1, ""},
		{"vLLM labels beside it", sample(1, "namespace", "prod", "pod", "p", "num_gpu_blocks", "1000", "block_size", "16"), 1000, 16, ""},
		{"fractional token count", sample(0.5, "namespace", "prod", "pod", "p", LabelKVTokens, "value"), 0, 0, ReasonBadLabels},
		{"zero tokens", sample(0, "namespace", "prod", "pod", "p", LabelKVTokens, "value"), 0, 0, ReasonBadLabels},
		{"above the block bound", sample(2e9, "namespace", "prod", "pod", "p", LabelKVTokens, "value"), 0, 0, ReasonAboveMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fq := &fakeQuerier{answers: map[string]model.Vector{
				"max_total_num_tokens": {tt.sample},
				"kv_cache_usage_perc":  {sample(0.3, "namespace", "prod", "pod", "p")},
				"num_requests_waiting": {sample(0, "namespace", "prod", "pod", "p")},
			}}
			res, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(), Request{Time: time.Now()})
			require.NoError(t, err)
			rm, ok := res.ReplicaMetrics("prod", "p")
			require.True(t, ok)
			assert.Equal(t, tt.blocks, rm.NumGPUBlocks)
			assert.Equal(t, tt.size, rm.BlockSize)
			if tt.dropped == "" {
				assert.Empty(t, res.Dropped)
				return
			}
			assert.Equal(t, map[Drop]int{{QueryCacheConfigInfo, tt.dropped}: 1}, res.Dropped)
		})
	}
}

func TestCollectFailsOnAnyQueryError(t *testing.T) {
	fq := &fakeQuerier{fail: "num_requests_waiting"}
	_, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(), Request{Time: time.Now()})
	require.Error(t, err)
	assert.True(t, IsQueryError(err))
	assert.Contains(t, err.Error(), "prometheus query queue_length: connection refused")
}

func TestCollectLatencyArrivalAndEPPQueue(t *testing.T) {
	tests := []struct {
		name    string
		answers map[string]model.Vector
		check   func(t *testing.T, res Result)
		dropped map[Drop]int
	}{
		{
			name: "seconds become milliseconds; arrival rate passes through",
			answers: map[string]model.Vector{
				"request_success_total":           {sample(2.5, "namespace", "prod", "pod", "a")},
				"time_to_first_token_seconds_sum": {sample(0.120, "namespace", "prod", "pod", "a")},
				"inter_token_latency_seconds":     {sample(0.015, "namespace", "prod", "pod", "a")},
				"llm_d_epp_flow_control_queue_":   {},
			},
			check: func(t *testing.T, res Result) {
				a := res.Pods[PodKey{"prod", "a"}]
				assert.Equal(t, 2.5, a.ArrivalRate)
				assert.InDelta(t, 120, a.AvgTTFTms, 1e-9)
				assert.InDelta(t, 15, a.AvgITLms, 1e-9)
			},
		},
		{
			name: "0/0 latency is no data, negative and infinite are dropped",
			answers: map[string]model.Vector{
				"time_to_first_token_seconds_sum": {
					sample(math.NaN(), "namespace", "prod", "pod", "idle"),
					sample(-0.1, "namespace", "prod", "pod", "neg"),
				},
				"inter_token_latency_seconds": {sample(math.Inf(1), "namespace", "prod", "pod", "inf")},
			},
			check: func(t *testing.T, res Result) {
				assert.Empty(t, res.Pods)
			},
			dropped: map[Drop]int{{QueryAvgTTFT, ReasonNegative}: 1, {QueryAvgITL, ReasonNotFinite}: 1},
		},
		{
			name: "EPP queue keyed by target model, else model name; namespace from the scrape when present",
			answers: map[string]model.Vector{
				"flow_control_queue_size": {
					sample(4, "namespace", "prod", "target_model_name", "meta/llama", "model_name", "alias"),
					sample(3, "model_name", "meta/llama"),
					sample(7, "namespace", "staging", "target_model_name", "meta/llama"),
					sample(1), // no model at all
				},
				"flow_control_queue_bytes": {sample(4096, "namespace", "prod", "target_model_name", "meta/llama")},
			},
			check: func(t *testing.T, res Result) {
				assert.Equal(t, EPPQueue{Size: 7, Bytes: 4096}, res.SchedulerQueueFor("prod", "meta/llama"),
					"prod's own series plus the one without namespace")
				assert.Equal(t, EPPQueue{Size: 10}, res.SchedulerQueueFor("staging", "meta/llama"))
				assert.Equal(t, EPPQueue{Size: 3}, res.SchedulerQueueFor("dev", "meta/llama"))
				assert.Equal(t, EPPQueue{}, res.SchedulerQueueFor("prod", "alias"), "target_model_name wins over model_name")
			},
			dropped: map[Drop]int{{QueryEPPQueueSize, ReasonNoTarget}: 1},
		},
		{
			name: "gateway arrivals keyed like the EPP queue; a model with no series is not reported",
			answers: map[string]model.Vector{
				"inference_objective_request_total": {
					sample(5, "namespace", "prod", "target_model_name", "meta/llama", "model_name", "alias"),
					sample(0.5, "model_name", "meta/llama"),
					sample(0, "namespace", "prod", "target_model_name", "idle/model"),
					sample(math.NaN(), "namespace", "prod", "target_model_name", "nan/model"),
					sample(-1, "namespace", "prod", "target_model_name", "neg/model"),
				},
			},
			check: func(t *testing.T, res Result) {
				rate, ok := res.GatewayArrivalsFor("prod", "meta/llama")
				assert.True(t, ok)
				assert.Equal(t, 5.5, rate)
				rate, ok = res.GatewayArrivalsFor("staging", "meta/llama")
				assert.True(t, ok, "the unlabelled series counts in any namespace")
				assert.Equal(t, 0.5, rate)
				rate, ok = res.GatewayArrivalsFor("prod", "idle/model")
				assert.True(t, ok, "rate 0 is reported")
				assert.Zero(t, rate)
				for _, m := range []string{"alias", "nan/model", "neg/model", "silent/model"} {
					_, ok = res.GatewayArrivalsFor("prod", m)
					assert.False(t, ok, m)
				}
			},
			dropped: map[Drop]int{{QueryGatewayArrivals, ReasonNotFinite}: 1, {QueryGatewayArrivals, ReasonNegative}: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Collector{API: &fakeQuerier{answers: tt.answers}, Labels: DefaultLabels()}
			res, err := c.Collect(context.Background(), Request{Namespaces: []string{"prod"}, Time: time.Now()})
			require.NoError(t, err)
			tt.check(t, res)
			if tt.dropped == nil {
				tt.dropped = map[Drop]int{}
			}
			assert.Equal(t, tt.dropped, res.Dropped)
		})
	}
}

// A finite 1.7e308 passes the finite and non-negative checks and would
// overflow inside the analyzers. Every collected field is bounded; the
// absurd sample is dropped and counted, the sane one kept.
func TestCollectDropsAbsurdFiniteValues(t *testing.T) {
	const huge = 1.7e308
	pod := func(v float64, name string) *model.Sample { return sample(v, "namespace", "prod", "pod", name) }
	eppModel := func(v float64, m string) *model.Sample { return sample(v, "namespace", "prod", "target_model_name", m) }
	tests := []struct {
		query  string
		metric string // the fake's substring of the query
		good   *model.Sample
		bad    *model.Sample
		kept   func(res Result) bool
	}{
		{QueryKvCacheUsage, "kv_cache_usage_perc", pod(0.5, "ok"), pod(huge, "bad"), nil},
		{QueryQueueLength, "num_requests_waiting", pod(3, "ok"), pod(huge, "bad"), nil},
		{QueryAvgInputTokens, "request_prompt_tokens", pod(800, "ok"), pod(huge, "bad"), nil},
		{QueryAvgOutputTokens, "request_generation_tokens", pod(200, "ok"), pod(huge, "bad"), nil},
		{QueryPrefixCacheHit, "prefix_cache_hits_total", pod(0.3, "ok"), pod(huge, "bad"), nil},
		{QueryArrivalRate, "rate(vllm:request_success_total", pod(6, "ok"), pod(huge, "bad"), nil},
		{QueryAvgTTFT, "time_to_first_token_seconds_sum", pod(0.3, "ok"), pod(huge, "bad"), nil},
		{QueryAvgITL, "inter_token_latency_seconds", pod(0.04, "ok"), pod(huge, "bad"), nil},
		{QueryCacheConfigInfo, "cache_config_info",
			sample(1, "namespace", "prod", "pod", "ok", "num_gpu_blocks", "2048", "block_size", "16"),
			sample(1, "namespace", "prod", "pod", "bad", "num_gpu_blocks", "170000000000000000", "block_size", "16"), nil},
		{QueryCacheConfigInfo, "max_total_num_tokens",
			sample(16384, "namespace", "prod", "pod", "ok", LabelKVTokens, "value"),
			sample(huge, "namespace", "prod", "pod", "bad", LabelKVTokens, "value"), nil},
		{QueryEPPQueueSize, "flow_control_queue_size", eppModel(4, "ok"), eppModel(huge, "bad"),
			func(res Result) bool { return res.SchedulerQueueFor("prod", "ok").Size == 4 }},
		{QueryEPPQueueBytes, "flow_control_queue_bytes", eppModel(4096, "ok"), eppModel(huge, "bad"),
			func(res Result) bool { return res.SchedulerQueueFor("prod", "ok").Bytes == 4096 }},
		{QueryGatewayArrivals, "inference_objective_request_total", eppModel(12, "ok"), eppModel(huge, "bad"),
			func(res Result) bool { r, ok := res.GatewayArrivalsFor("prod", "ok"); return ok && r == 12 }},
		{QueryRequestCount, "increase(vllm:request_success_total",
			sample(42, "namespace", "prod", "model_name", "ok"), sample(huge, "namespace", "prod", "model_name", "bad"),
			func(res Result) bool {
				n, ok := res.RequestsOver(10*time.Minute, ModelKey{"prod", "ok"})
				return ok && n == 42
			}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			fq := &fakeQuerier{answers: map[string]model.Vector{tt.metric: {tt.good, tt.bad}}}
			res, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(),
				Request{Namespaces: []string{"prod"}, RetentionWindows: []time.Duration{10 * time.Minute}, Time: time.Now()})
			require.NoError(t, err)
			assert.Equal(t, map[Drop]int{{tt.query, ReasonAboveMax}: 1}, res.Dropped)
			require.Len(t, res.DroppedSamples, 1)
			d := res.DroppedSamples[0]
			assert.Equal(t, "prod", d.Namespace)
			assert.Contains(t, []string{d.Pod, d.Model}, "bad", "the log names where the sample came from")
			if tt.kept != nil {
				assert.True(t, tt.kept(res), "the sane sample is kept: %+v", res)
				for _, q := range res.SchedulerQueues {
					assert.Less(t, q.Size+q.Bytes, 1e300)
				}
				return
			}
			assert.Contains(t, res.Pods, PodKey{"prod", "ok"})
			assert.NotContains(t, res.Pods, PodKey{"prod", "bad"})
		})
	}
}

// The bounds are far outside anything a fleet reports: ordinary figures of
// a large deployment all pass.
func TestRejectKeepsRealisticValues(t *testing.T) {
	for q, v := range map[string]float64{
		QueryQueueLength: 5000, QueryAvgInputTokens: 1_000_000, QueryArrivalRate: 50_000, QueryGatewayArrivals: 200_000,
		QueryAvgTTFT: 600, QueryAvgITL: 5, QueryEPPQueueSize: 1e7, QueryEPPQueueBytes: 1e12, QueryRequestCount: 1e11,
		QueryKvCacheUsage: 1, QueryPrefixCacheHit: 1, QueryCacheConfigInfo: 1,
	} {
		assert.Empty(t, Reject(q, v), "%s %g", q, v)
		if q != QueryCacheConfigInfo {
			assert.Equal(t, ReasonAboveMax, Reject(q, math.Nextafter(MaxValue(q), math.Inf(1))), q)
		}
	}
}

// Each pod's histograms (queue time, TPOT, TTFT) are assembled from their
// buckets' rates; the mean TTFT is read from the TTFT histogram's sum and
// count apart.
func TestCollectHistogramBuckets(t *testing.T) {
	pod := []string{"namespace", "prod", "pod", "p"}
	bucket := func(v float64, le string) *model.Sample {
		return sample(v, append(append([]string(nil), pod...), "le", le)...)
	}
	fq := &fakeQuerier{answers: map[string]model.Vector{
		"request_queue_time_seconds_bucket":            {bucket(6, "+Inf"), bucket(3, "1"), bucket(5, "2")},
		"request_time_per_output_token_seconds_bucket": {bucket(1, "0.1"), bucket(2, "+Inf")},
		"time_to_first_token_seconds_bucket":           {bucket(10, "+Inf"), bucket(6, "1"), bucket(9, "2.5")},
		"time_to_first_token_seconds_sum":              {sample(0.9, pod...)},
		"kv_cache_usage_perc":                          {sample(0.3, pod...)},
		"num_requests_waiting":                         {sample(0, pod...)},
	}}
	res, err := Collector{API: fq, Labels: DefaultLabels()}.Collect(context.Background(), Request{Time: time.Now()})
	require.NoError(t, err)
	rm, ok := res.ReplicaMetrics("prod", "p")
	require.True(t, ok)
	inf := math.Inf(1)
	assert.Equal(t, decision.Histogram{Bounds: []float64{1, 2, inf}, Counts: []float64{3, 5, 6}}, rm.QueueTime)
	assert.Equal(t, decision.Histogram{Bounds: []float64{0.1, inf}, Counts: []float64{1, 2}}, rm.TPOT)
	assert.Equal(t, decision.Histogram{Bounds: []float64{1, 2.5, inf}, Counts: []float64{6, 9, 10}}, rm.TTFT)
	assert.InDelta(t, 1.0/6, rm.QueueTime.Above(2), 1e-9)
	assert.InDelta(t, 0.1, rm.TTFT.Above(2.5), 1e-9)
	assert.InDelta(t, 900, rm.AvgTTFTms, 1e-9)
}
