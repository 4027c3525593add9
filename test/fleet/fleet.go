// Package fleet emulates a vLLM serving fleet for the e2e rig: for every
// Ready pod of a configured variant it serves vLLM's metric names (or
// SGLang's, for a variant with Engine "sglang"), computed
// from an offered request rate split across the model's Ready replicas; it
// writes a Prometheus file_sd file listing those pods, and serves the llm-d
// EPP flow-control queue for models with no Ready replica.
package fleet

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Variant is one Deployment serving a model; its pods carry app=<Name>.
type Variant struct {
	Namespace string
	Name      string
	Model     string
	// KVCapacityTokens is the KV cache size of one replica, in tokens.
	KVCapacityTokens float64
	// MaxNumSeqs bounds the running batch; the excess waits.
	MaxNumSeqs float64
	// TokensPerRequest is the KV footprint of one in-flight request.
	TokensPerRequest float64
	// LatencySeconds is how long one request stays in flight.
	LatencySeconds float64
	// Engine is EngineVLLM ("", the default) or EngineSGLang.
	Engine string
}

// Engines a variant's pods emulate.
const (
	EngineVLLM   = ""
	EngineSGLang = "sglang"
)

// Load model, per pod, for an offered rate L (req/s) over n Ready replicas:
// in flight = L/n * latency (Little's law); running = min(in flight,
// max-num-seqs); waiting = the rest; KV usage = running * tokens per request
// / KV capacity (capped at 0.99). Requests succeed at L/n per second.
type podState struct {
	variant          *Variant
	kv, waiting, run float64
	success          float64
	metrics          *podMetrics
}

// podMetrics is one pod's /metrics: its own registry, since each pod is a
// separate scrape target and its series carry no pod label (file_sd adds
// namespace and pod).
type podMetrics struct {
	reg              *prometheus.Registry
	kv, waiting, run prometheus.Gauge
	success          prometheus.Counter
	successFloor     float64 // what success has been advanced to
	handler          http.Handler
}

func newPodMetrics(v *Variant) *podMetrics {
	if v.Engine == EngineSGLang {
		return newSGLangPodMetrics(v)
	}
	l := prometheus.Labels{"model_name": v.Model, "engine": "0"}
	gauge := func(name, help string, extra prometheus.Labels) prometheus.Gauge {
		cl := maps.Clone(l)
		maps.Copy(cl, extra)
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl})
	}
	m := &podMetrics{
		reg:     prometheus.NewRegistry(),
		kv:      gauge("vllm:kv_cache_usage_perc", "KV cache usage, 0..1.", nil),
		waiting: gauge("vllm:num_requests_waiting", "Waiting requests.", nil),
		run:     gauge("vllm:num_requests_running", "Running requests.", nil),
		success: prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Finished requests.",
			ConstLabels: prometheus.Labels{"model_name": v.Model, "engine": "0", "finished_reason": "stop"}}),
	}
	config := gauge("vllm:cache_config_info", "Cache config.", prometheus.Labels{"block_size": "16",
		"num_gpu_blocks": strconv.FormatInt(int64(v.KVCapacityTokens/16), 10), "enable_prefix_caching": "True", "gpu_memory_utilization": "0.9"})
	config.Set(1)
	m.reg.MustRegister(m.kv, m.waiting, m.run, config, m.success)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// newSGLangPodMetrics serves SGLang's names for the same state: the KV
// pool's usage and size in tokens, queued and running requests, finished
// requests.
func newSGLangPodMetrics(v *Variant) *podMetrics {
	l := prometheus.Labels{"model_name": v.Model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: l})
	}
	m := &podMetrics{
		reg:     prometheus.NewRegistry(),
		kv:      gauge("sglang:token_usage", "The token usage."),
		waiting: gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
		run:     gauge("sglang:num_running_reqs", "The number of running requests."),
		success: prometheus.NewCounter(prometheus.CounterOpts{Name: "sglang:num_requests_total", Help: "Number of requests processed.", ConstLabels: l}),
	}
	pool := gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
	pool.Set(v.KVCapacityTokens)
	m.reg.MustRegister(m.kv, m.waiting, m.run, pool, m.success)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// publish copies the pod's state into its metrics; the counter shows whole
// requests, so it advances by the change of the floor.
func (st *podState) publish() {
	m := st.metrics
	m.kv.Set(st.kv)
	m.waiting.Set(st.waiting)
	m.run.Set(st.run)
	if n := math.Floor(st.success); n > m.successFloor {
		m.success.Add(n - m.successFloor)
		m.successFloor = n
	}
}

// Fleet is the emulator. Offered load is set per model with SetLoad.
type Fleet struct {
	Addr string

	mu       sync.Mutex
	variants map[string]*Variant // by namespace/app label
	load     map[string]float64  // req/s by namespace/model
	pods     map[string]*podState
	eppQueue map[string]float64 // by namespace/model
	// arrivals is the EPP's request counter (requests that reached the
	// gateway, served or held), by namespace/model.
	arrivals map[string]float64
	lister   corelisters.PodLister
	// epp serves the EPP's series; floors of arrivals already counted.
	epp          *prometheus.Registry
	eppSize      *prometheus.GaugeVec
	eppArrivals  *prometheus.CounterVec
	arrivalFloor map[string]float64
	sdFile       string
	lastSD       string
	srv          *http.Server
	tick         time.Duration
}

// Start serves on 127.0.0.1 and keeps the metrics and the file_sd file up to
// date from the pod informer every tick until ctx ends.
func Start(ctx context.Context, kube kubernetes.Interface, sdFile string, tick time.Duration, variants ...Variant) (*Fleet, error) {
	f := &Fleet{variants: map[string]*Variant{}, load: map[string]float64{}, pods: map[string]*podState{},
		eppQueue: map[string]float64{}, arrivals: map[string]float64{}, sdFile: sdFile, tick: tick,
		epp: prometheus.NewRegistry(), arrivalFloor: map[string]float64{},
		eppSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llm_d_epp_flow_control_queue_size", Help: "EPP queued requests."},
			[]string{"fairness_id", "priority", "inference_pool", "model_name", "target_model_name"}),
		// The gateway's request counter (gateway-api-inference-extension
		// v1.x name), which the slo-planner reads as demand.
		eppArrivals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inference_objective_request_total", Help: "Requests received by the EPP."},
			[]string{"model_name", "target_model_name"}),
	}
	f.epp.MustRegister(f.eppSize, f.eppArrivals)
	for i := range variants {
		v := variants[i]
		f.variants[v.Namespace+"/"+v.Name] = &v
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	f.lister = factory.Core().V1().Pods().Lister()
	factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.Addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/pods/", f.servePod)
	mux.Handle("/epp/metrics", promhttp.HandlerFor(f.epp, promhttp.HandlerOpts{}))
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	if err := f.step(0); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				_ = f.srv.Close()
				return
			case <-t.C:
				_ = f.step(tick.Seconds())
			}
		}
	}()
	return f, nil
}

// SetLoad sets the offered request rate (req/s) of a model in a namespace.
func (f *Fleet) SetLoad(namespace, model string, rps float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.load[namespace+"/"+model] = rps
	_ = f.recompute(0)
}

func (f *Fleet) step(dt float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recompute(dt)
}

// recompute rebuilds per-pod state from the Ready pods, advances counters by
// dt seconds, and rewrites the file_sd file when the pod set changed.
func (f *Fleet) recompute(dt float64) error {
	ready := map[string][]*corev1.Pod{} // by namespace/model
	all, err := f.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range all {
		v := f.variants[p.Namespace+"/"+p.Labels["app"]]
		if v == nil || p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		key := p.Namespace + "/" + v.Model
		ready[key] = append(ready[key], p)
		seen[p.Namespace+"/"+p.Name] = true
		if f.pods[p.Namespace+"/"+p.Name] == nil {
			f.pods[p.Namespace+"/"+p.Name] = &podState{variant: v, metrics: newPodMetrics(v)}
		}
	}
	for k := range f.pods {
		if !seen[k] {
			delete(f.pods, k)
		}
	}
	for model, rps := range f.load {
		f.arrivals[model] += rps * dt
		pods := ready[model]
		if len(pods) == 0 {
			// Requests wait at the EPP until a replica is Ready.
			if rps > 0 {
				f.eppQueue[model] = math.Min(f.eppQueue[model]+math.Max(rps*dt, 1), 1000)
			}
			continue
		}
		f.eppQueue[model] = 0
		perPod := rps / float64(len(pods))
		for _, p := range pods {
			st := f.pods[p.Namespace+"/"+p.Name]
			v := st.variant
			inFlight := perPod * v.LatencySeconds
			st.run = math.Min(inFlight, v.MaxNumSeqs)
			st.waiting = inFlight - st.run
			st.kv = math.Min(0.99, st.run*v.TokensPerRequest/v.KVCapacityTokens)
			st.success += perPod * dt
			st.publish()
		}
	}
	f.publishEPP()
	return f.writeSD()
}

// publishEPP copies the EPP queue (whole requests) and the arrivals counter
// (advanced by the change of its floor) into the EPP's metrics.
func (f *Fleet) publishEPP() {
	for k, q := range f.eppQueue {
		_, model, _ := strings.Cut(k, "/")
		f.eppSize.WithLabelValues("default", "0", "pool", model, model).Set(math.Floor(q))
	}
	for k, a := range f.arrivals {
		_, model, _ := strings.Cut(k, "/")
		c := f.eppArrivals.WithLabelValues(model, model) // created at 0 when first seen
		if n := math.Floor(a); n > f.arrivalFloor[k] {
			c.Add(n - f.arrivalFloor[k])
			f.arrivalFloor[k] = n
		}
	}
}

func (f *Fleet) writeSD() error {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	keys := make([]string, 0, len(f.pods))
	for k := range f.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	groups := []group{}
	for _, k := range keys {
		ns, pod, _ := strings.Cut(k, "/")
		groups = append(groups, group{Targets: []string{f.Addr}, Labels: map[string]string{
			"__metrics_path__": "/pods/" + ns + "/" + pod + "/metrics", "namespace": ns, "pod": pod}})
	}
	data, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	if string(data) == f.lastSD {
		return nil
	}
	tmp := f.sdFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	f.lastSD = string(data)
	return os.Rename(tmp, f.sdFile) // atomic for Prometheus' file watcher
}

func (f *Fleet) servePod(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // pods/ns/name/metrics
	if len(parts) != 4 {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	st, ok := f.pods[parts[1]+"/"+parts[2]]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	st.metrics.handler.ServeHTTP(w, r)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ScrapeConfig is a prometheus.yml that scrapes the fleet through file_sd.
func ScrapeConfig(sdFile, interval string) string {
	return "global:\n  scrape_interval: " + interval + "\n  evaluation_interval: " + interval + "\n" +
		"scrape_configs:\n  - job_name: vllm\n    file_sd_configs:\n      - files: [\"" + sdFile + "\"]\n"
}
