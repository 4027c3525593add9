// Package fakevllm serves vLLM's Prometheus metrics for a set of pretend
// pods, with values a test sets. Series carry the namespace and pod labels a
// PodMonitor would add, so Prometheus scrapes it with honor_labels.
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

	mu       sync.Mutex
	reg      *prometheus.Registry
	kv       *prometheus.GaugeVec
	waiting  *prometheus.GaugeVec
	running  *prometheus.GaugeVec
	config   *prometheus.GaugeVec
	success  *prometheus.CounterVec
	srv      *http.Server
	ln       net.Listener
	legacyKV bool
}

var podLabels = []string{"namespace", "pod", "model_name"}

// Start serves on 127.0.0.1 at a free port. legacyKV exports the pre-0.10
// KV gauge name (vllm:gpu_cache_usage_perc) instead of the new one.
func Start(legacyKV bool) (*Exporter, error) {
	kvName := "vllm:kv_cache_usage_perc"
	if legacyKV {
		kvName = "vllm:gpu_cache_usage_perc"
	}
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
	}
	e.reg.MustRegister(e.kv, e.waiting, e.running, e.config, e.success)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.ln, e.Addr = ln, ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	e.srv = &http.Server{Handler: mux}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// Set publishes a pod's saturation gauges (and its cache config).
func (e *Exporter) Set(p Pod, kvUsage, waiting float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := []string{p.Namespace, p.Name, p.Model}
	e.kv.WithLabelValues(l...).Set(kvUsage)
	e.waiting.WithLabelValues(l...).Set(waiting)
	e.running.WithLabelValues(l...).Set(0)
	e.config.WithLabelValues(append(l, strconv.Itoa(1000), strconv.Itoa(16))...).Set(1)
}

// Served counts n successful requests for the pod.
func (e *Exporter) Served(p Pod, n float64) {
	e.success.WithLabelValues(p.Namespace, p.Name, p.Model, "stop").Add(n)
}

// Remove stops exporting a pod's series (the pod went away).
func (e *Exporter) Remove(p Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := prometheus.Labels{"namespace": p.Namespace, "pod": p.Name, "model_name": p.Model}
	e.kv.Delete(l)
	e.waiting.Delete(l)
	e.running.Delete(l)
	e.config.DeletePartialMatch(l)
	e.success.DeletePartialMatch(l)
}

// Close stops the server.
func (e *Exporter) Close() { _ = e.srv.Close() }

// ScrapeConfig is a prometheus.yml scraping the exporter every interval,
// keeping the exporter's namespace/pod labels (honor_labels).
func (e *Exporter) ScrapeConfig(interval string) string {
	return "global:\n  scrape_interval: " + interval + "\n  evaluation_interval: " + interval + "\n" +
		"scrape_configs:\n  - job_name: vllm\n    honor_labels: true\n    static_configs:\n      - targets: [\"" + e.Addr + "\"]\n"
}
