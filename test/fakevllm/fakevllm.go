// Package fakevllm serves vLLM's (or SGLang's, StartSGLang) Prometheus
// metrics for a set of pretend pods, with values a test sets. Series carry
// the namespace and pod labels a PodMonitor would add, so Prometheus scrapes
// it with honor_labels.
package fakevllm

import (
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pod identifies one pretend serving pod.
type Pod struct {
	Namespace string
	Name      string
	Model     string
}

// Exporter is an HTTP server on loopback serving the metrics.
type Exporter struct {
	Addr string

	mu      sync.Mutex
	reg     *prometheus.Registry
	kv      *prometheus.GaugeVec
	waiting *prometheus.GaugeVec
	running *prometheus.GaugeVec
	config  *prometheus.GaugeVec
	success *prometheus.CounterVec
	prompt  *prometheus.HistogramVec
	output  *prometheus.HistogramVec
	ttft    *prometheus.HistogramVec
	itl     *prometheus.HistogramVec
	// tpot is the per-request time-per-output-token histogram (nil on
	// the legacy exporter: older vLLMs have none).
	tpot *prometheus.HistogramVec
	// queue is the per-request queue-time histogram (nil where tpot is).
	queue    *prometheus.HistogramVec
	eppSize  *prometheus.GaugeVec
	eppBytes *prometheus.GaugeVec
	gateway  *prometheus.CounterVec
	pcQuery  *prometheus.CounterVec
	pcHit    *prometheus.CounterVec
	srv      *http.Server
	ln       net.Listener
	legacyKV bool
	// sglang: SGLang's names. It has no token histograms by default, only
	// counters per finished request (prompt, generation, cached tokens).
	sglang                   bool
	promptTotal, outputTotal *prometheus.CounterVec
	cachedTotal              *prometheus.CounterVec
}

var podLabels = []string{"namespace", "pod", "model_name"}

// eppLabels are the EPP flow-control queue's labels: no namespace.
var eppLabels = []string{"target_model_name", "model_name", "inference_pool"}

// Start serves on 127.0.0.1 at a free port. legacyKV exports the older
// names instead of the new ones: the pre-0.10 KV gauge
// (vllm:gpu_cache_usage_perc), the per-token latency histogram
// vllm:time_per_output_token_seconds, the EPP's deprecated
// inference_extension_flow_control_queue_* gauges, and the pre-v1.0
// gateway request counter inference_model_request_total.
func Start(legacyKV bool) (*Exporter, error) {
	kvName, itlName, eppPrefix := "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds", "llm_d_epp"
	gatewayName := "inference_objective_request_total"
	if legacyKV {
		kvName, itlName, eppPrefix = "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds", "inference_extension"
		gatewayName = "inference_model_request_total"
	}
	tokenBuckets := prometheus.ExponentialBuckets(1, 4, 8)
	latencyBuckets := prometheus.ExponentialBuckets(0.001, 2, 16)
	e := &Exporter{
		reg:      prometheus.NewRegistry(),
		legacyKV: legacyKV,
		kv:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: kvName, Help: "KV cache usage, 0..1."}, podLabels),
		waiting:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_waiting", Help: "Waiting requests."}, podLabels),
		running:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Running requests."}, podLabels),
		config: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Cache config."},
			append(append([]string{}, podLabels...), "num_gpu_blocks", "block_size")),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Finished requests."},
			append(append([]string{}, podLabels...), "finished_reason")),
		prompt: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:request_prompt_tokens", Help: "Prompt tokens.", Buckets: tokenBuckets}, podLabels),
		output: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:request_generation_tokens", Help: "Generated tokens.", Buckets: tokenBuckets}, podLabels),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "Time to first token.",
			Buckets: latencyBuckets}, podLabels),
		itl:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: itlName, Help: "Inter-token latency.", Buckets: latencyBuckets}, podLabels),
		eppSize:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: eppPrefix + "_flow_control_queue_size", Help: "EPP queued requests."}, eppLabels),
		eppBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: eppPrefix + "_flow_control_queue_bytes", Help: "EPP queued bytes."}, eppLabels),
		gateway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: gatewayName, Help: "Requests received by the EPP."},
			[]string{"model_name", "target_model_name"}),
		pcQuery: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_queries_total", Help: "Prompt tokens looked up in the prefix cache."}, podLabels),
		pcHit:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_hits_total", Help: "Prompt tokens found in the prefix cache."}, podLabels),
	}
	e.reg.MustRegister(e.kv, e.waiting, e.running, e.config, e.success, e.prompt, e.output, e.ttft, e.itl, e.eppSize, e.eppBytes, e.gateway, e.pcQuery, e.pcHit)
	if !legacyKV {
		e.tpot = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:request_time_per_output_token_seconds",
			Help: "Time per output token per request.", Buckets: TPOTBuckets}, podLabels)
		e.queue = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:request_queue_time_seconds",
			Help: "Time each request waited before it was first scheduled.", Buckets: QueueBuckets}, podLabels)
		e.reg.MustRegister(e.tpot, e.queue)
	}
	if err := e.serve(); err != nil {
		return nil, err
	}
	return e, nil
}

// StartSGLang serves SGLang's names instead of vLLM's (the EPP's are the
// same): sglang:token_usage, num_queue_reqs, num_running_reqs,
// max_total_num_tokens (the KV pool in tokens), num_requests_total,
// prompt/generation/cached_tokens_total, and the time_to_first_token and
// inter_token_latency histograms; legacyITL exports the older
// sglang:time_per_output_token_seconds instead.
func StartSGLang(legacyITL bool) (*Exporter, error) {
	itlName := "sglang:inter_token_latency_seconds"
	if legacyITL {
		itlName = "sglang:time_per_output_token_seconds"
	}
	latencyBuckets := prometheus.ExponentialBuckets(0.001, 2, 16)
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, podLabels)
	}
	e := &Exporter{
		reg:     prometheus.NewRegistry(),
		sglang:  true,
		kv:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sglang:token_usage", Help: "The token usage."}, podLabels),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sglang:num_queue_reqs", Help: "Requests in the waiting queue."}, podLabels),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sglang:num_running_reqs", Help: "Running requests."}, podLabels),
		config: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sglang:max_total_num_tokens",
			Help: "Maximum total number of tokens in the KV cache pool."}, podLabels),
		success:     counter("sglang:num_requests_total", "Number of requests processed."),
		promptTotal: counter("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
		outputTotal: counter("sglang:generation_tokens_total", "Number of generation tokens processed."),
		cachedTotal: counter("sglang:cached_tokens_total", "Number of cached prompt tokens."),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sglang:time_to_first_token_seconds", Help: "Time to first token.",
			Buckets: latencyBuckets}, podLabels),
		itl:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: itlName, Help: "Inter-token latency.", Buckets: latencyBuckets}, podLabels),
		eppSize:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llm_d_epp_flow_control_queue_size", Help: "EPP queued requests."}, eppLabels),
		eppBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llm_d_epp_flow_control_queue_bytes", Help: "EPP queued bytes."}, eppLabels),
		gateway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inference_objective_request_total", Help: "Requests received by the EPP."},
			[]string{"model_name", "target_model_name"}),
	}
	e.tpot = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sglang:request_time_per_output_token_seconds",
		Help: "Time per output token per request.", Buckets: TPOTBuckets}, podLabels)
	e.reg.MustRegister(e.kv, e.waiting, e.running, e.config, e.success, e.promptTotal, e.outputTotal, e.cachedTotal, e.ttft, e.itl,
		e.eppSize, e.eppBytes, e.gateway, e.tpot)
	if err := e.serve(); err != nil {
		return nil, err
	}
	return e, nil
}

// TPOTBuckets are vLLM's bucket bounds (seconds) of the per-request
// time-per-output-token histogram.
var TPOTBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}

// QueueBuckets are vLLM's bucket bounds (seconds) of the per-request
// queue-time histogram.
var QueueBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}

// KVCapacityTokens is what Set publishes as a pod's KV cache: vLLM's 1000
// blocks of 16 tokens, SGLang's pool of as many tokens.
const KVCapacityTokens = 16000

func (e *Exporter) serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.ln, e.Addr = ln, ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	e.srv = &http.Server{Handler: mux}
	go func() { _ = e.srv.Serve(ln) }()
	return nil
}

// Set publishes a pod's saturation gauges (and its cache config).
func (e *Exporter) Set(p Pod, kvUsage, waiting float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := []string{p.Namespace, p.Name, p.Model}
	e.kv.WithLabelValues(l...).Set(kvUsage)
	e.waiting.WithLabelValues(l...).Set(waiting)
	e.running.WithLabelValues(l...).Set(0)
	if e.sglang {
		e.config.WithLabelValues(l...).Set(KVCapacityTokens)
		return
	}
	e.config.WithLabelValues(append(l, strconv.Itoa(KVCapacityTokens/16), strconv.Itoa(16))...).Set(1)
}

// successLabels are the request counter's labels for a pod: vLLM's has
// finished_reason, SGLang's not.
func (e *Exporter) successLabels(p Pod) []string {
	if e.sglang {
		return []string{p.Namespace, p.Name, p.Model}
	}
	return []string{p.Namespace, p.Name, p.Model, "stop"}
}

// Served counts n successful requests for the pod.
func (e *Exporter) Served(p Pod, n float64) {
	e.success.WithLabelValues(e.successLabels(p)...).Add(n)
}

// Request is what one finished request looked like.
type Request struct {
	PromptTokens, OutputTokens float64
	// TTFT and ITL in seconds, as vLLM observes them; TPOT is the
	// request's time per output token (0: ITL); Queue its time waiting
	// before it was first scheduled.
	TTFT, ITL, TPOT, Queue float64
	// CachedPromptTokens of PromptTokens were found in the prefix cache.
	CachedPromptTokens float64
}

// Finished records n finished requests like r for the pod: the success
// counter, the prefix cache counters, and the token and latency histograms
// (ITL once per request, which keeps its mean; TPOT per request); SGLang's
// token counters in place of the token histograms.
func (e *Exporter) Finished(p Pod, n int, r Request) {
	l := []string{p.Namespace, p.Name, p.Model}
	e.success.WithLabelValues(e.successLabels(p)...).Add(float64(n))
	if e.sglang {
		e.promptTotal.WithLabelValues(l...).Add(float64(n) * r.PromptTokens)
		e.outputTotal.WithLabelValues(l...).Add(float64(n) * r.OutputTokens)
		if r.CachedPromptTokens > 0 { // SGLang increments it only then
			e.cachedTotal.WithLabelValues(l...).Add(float64(n) * r.CachedPromptTokens)
		}
	} else {
		e.pcQuery.WithLabelValues(l...).Add(float64(n) * r.PromptTokens)
		e.pcHit.WithLabelValues(l...).Add(float64(n) * r.CachedPromptTokens)
	}
	for range n {
		if !e.sglang {
			e.prompt.WithLabelValues(l...).Observe(r.PromptTokens)
			e.output.WithLabelValues(l...).Observe(r.OutputTokens)
		}
		e.ttft.WithLabelValues(l...).Observe(r.TTFT)
		e.itl.WithLabelValues(l...).Observe(r.ITL)
		if e.tpot != nil {
			tpot := r.TPOT
			if tpot == 0 {
				tpot = r.ITL
			}
			e.tpot.WithLabelValues(l...).Observe(tpot)
		}
		if e.queue != nil {
			e.queue.WithLabelValues(l...).Observe(r.Queue)
		}
	}
}

// SetEPPQueue publishes the EPP flow-control queue for a model (labels
// target_model_name and model_name both set to it; no namespace, as the
// EPP exports none).
func (e *Exporter) SetEPPQueue(model, pool string, size, bytes float64) {
	e.eppSize.WithLabelValues(model, model, pool).Set(size)
	e.eppBytes.WithLabelValues(model, model, pool).Set(bytes)
}

// GatewayRequests counts n requests received by the EPP for a model (labels
// model_name and target_model_name both set to it; no namespace, as the EPP
// exports none).
func (e *Exporter) GatewayRequests(model string, n float64) {
	e.gateway.WithLabelValues(model, model).Add(n)
}

// Close stops the server.
func (e *Exporter) Close() { _ = e.srv.Close() }

// ScrapeConfig is a prometheus.yml scraping the exporter every interval,
// keeping the exporter's namespace/pod labels (honor_labels).
func (e *Exporter) ScrapeConfig(interval string) string {
	return "global:\n  scrape_interval: " + interval + "\n  evaluation_interval: " + interval + "\n" +
		"scrape_configs:\n  - job_name: vllm\n    honor_labels: true\n    static_configs:\n      - targets: [\"" + e.Addr + "\"]\n"
}
