package scalefromzero

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wva-project/wva/pkg/budget"
)

// Metrics are the fast path's Prometheus metrics.
type Metrics struct {
	Latency       prometheus.Histogram
	Decisions     *prometheus.CounterVec
	GroupsAtZero  prometheus.Gauge
	Scrapes       *prometheus.CounterVec
	ScrapeSeconds prometheus.Histogram
	// SamplesSkipped: bad EPP queue samples left out of an answer that
	// still counts.
	SamplesSkipped *prometheus.CounterVec
	BudgetGPUs     *prometheus.GaugeVec
	BudgetMemory   *prometheus.GaugeVec
	BudgetBlocked  *prometheus.GaugeVec
	ActivatorReqs  *prometheus.CounterVec
	ActivatorHold  prometheus.Histogram
	// ActivatorHeld and ActivatorHeldBytes are what the activator's caps bound.
	ActivatorHeld      prometheus.Gauge
	ActivatorHeldBytes prometheus.Gauge
}

// NewMetrics registers the metrics on reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	fast := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &Metrics{
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wva_scale_from_zero_latency_seconds",
			Help: "From reading a non-zero EPP queue (or an activator request arriving) to the API server accepting the scale to 1.", Buckets: fast}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_scale_from_zero_decisions_total",
			Help: "Wake-up decisions for groups at zero with queued requests, by result (scaled, already_scaled, budget_blocked, no_variant, error)."}, []string{"result"}),
		GroupsAtZero: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_scale_from_zero_groups_at_zero",
			Help: "Variant groups whose targets are all at zero replicas (the ones watched for queued requests)."}),
		Scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_scale_from_zero_epp_scrapes_total",
			Help: "EPP /metrics scrapes by result (ok, unauthorized, timeout, http_status, parse, connection)."}, []string{"result"}),
		ScrapeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wva_scale_from_zero_epp_scrape_duration_seconds",
			Help: "Duration of one EPP /metrics scrape.", Buckets: fast}),
		SamplesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_scale_from_zero_epp_samples_skipped_total",
			Help: "EPP queue samples left out of an answer, by reason (malformed, duplicate_label, too_many_labels, model_too_long, value)."}, []string{"reason"}),
		BudgetGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_scale_from_zero_budget_gpus",
			Help: "GPU budget per node pool: kind total, allocated or available (total and available absent when unlimited)."}, []string{"pool", "kind"}),
		BudgetMemory: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_scale_from_zero_budget_gpu_memory_bytes",
			Help: "GPU memory budget per node pool: kind total, allocated or available (total and available absent when unlimited)."}, []string{"pool", "kind"}),
		BudgetBlocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_scale_from_zero_budget_blocked",
			Help: "GPUs held by each holder of the budget that keeps a group with queued requests at zero."}, []string{"namespace", "model_id", "holder"}),
		ActivatorReqs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_activator_requests_total",
			Help: "Activator requests by result (forwarded, held_forwarded, timeout, budget_blocked, overloaded, too_large, read_timeout, unknown_model, bad_request, backend_error, path_not_allowed, method_not_allowed)."}, []string{"result"}),
		ActivatorHold: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wva_activator_hold_seconds",
			Help: "How long the activator held a request for a model that was not ready.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		ActivatorHeld: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_activator_held_requests",
			Help: "Requests the activator holds right now waiting for their model (capped by --activator-max-held-requests)."}),
		ActivatorHeldBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_activator_held_bytes",
			Help: "Request header and body bytes the activator has in memory right now (capped by --activator-max-held-bytes)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Latency, m.Decisions, m.GroupsAtZero, m.Scrapes, m.ScrapeSeconds, m.SamplesSkipped, m.BudgetGPUs, m.BudgetMemory,
			m.BudgetBlocked, m.ActivatorReqs, m.ActivatorHold, m.ActivatorHeld, m.ActivatorHeldBytes)
	}
	return m
}

func (m *Metrics) observeScrape(r ScrapeResult, d time.Duration) {
	result := "ok"
	if r.Err != nil {
		result = errorReason(r.Err)
	}
	m.Scrapes.WithLabelValues(result).Inc()
	m.ScrapeSeconds.Observe(d.Seconds())
	for reason, n := range r.Skipped {
		m.SamplesSkipped.WithLabelValues(reason).Add(float64(n))
	}
}

// setBudget replaces the per-pool gauges.
func (m *Metrics) setBudget(usage map[string]budget.Usage) {
	m.BudgetGPUs.Reset()
	m.BudgetMemory.Reset()
	for pool, u := range usage {
		avail := u.Available()
		set := func(g *prometheus.GaugeVec, total, allocated, available int64) {
			g.WithLabelValues(pool, "allocated").Set(float64(allocated))
			if total != budget.Unlimited {
				g.WithLabelValues(pool, "total").Set(float64(total))
				g.WithLabelValues(pool, "available").Set(float64(available))
			}
		}
		set(m.BudgetGPUs, u.Total.GPUs, u.Allocated.GPUs, avail.GPUs)
		set(m.BudgetMemory, u.Total.GPUMemory, u.Allocated.GPUMemory, avail.GPUMemory)
	}
}
