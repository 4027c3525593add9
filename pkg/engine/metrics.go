package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wva-project/wva/pkg/analyzer"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/deletioncost"
)

// Metrics are the engine's own Prometheus metrics, for Grafana and alerts.
type Metrics struct {
	DesiredReplicas *prometheus.GaugeVec
	CurrentReplicas *prometheus.GaugeVec
	DesiredRatio    *prometheus.GaugeVec
	VariantCost     *prometheus.GaugeVec
	DecisionInfo    *prometheus.GaugeVec
	AvgSpareKv      *prometheus.GaugeVec
	AvgSpareQueue   *prometheus.GaugeVec
	MetricsOK       *prometheus.GaugeVec
	Decisions       *prometheus.CounterVec
	CycleDuration   prometheus.Histogram
	QueryErrors     *prometheus.CounterVec
	DroppedSamples  *prometheus.CounterVec
	QueriesPerCycle prometheus.Gauge
	LastSuccess     prometheus.Gauge
	StatusWriteErrs prometheus.Counter
	// SharedTargetVariants counts the variants the last cycle held because
	// another variant scales the same target (holdSharedTargets).
	SharedTargetVariants prometheus.Gauge
	// DeletionCostPatches counts pod-deletion-cost patches by result (ok:
	// pods patched; error: variants whose patches failed).
	DeletionCostPatches *prometheus.CounterVec
	// Unbudgeted is 1 for each variant no GPU budget covers, by reason (the
	// GPUBudgeted condition's).
	Unbudgeted *prometheus.GaugeVec
	// PlanArrivals, PlanRequired and PlanSupply are a group's figures in
	// requests per second, PlanReplicaRate a variant's credited rate per
	// replica, from an analyzer that sizes by request rate
	// (analyzer.RateReporter).
	PlanArrivals    *prometheus.GaugeVec
	PlanRequired    *prometheus.GaugeVec
	PlanSupply      *prometheus.GaugeVec
	PlanReplicaRate *prometheus.GaugeVec

	unbudgetedLabels map[[3]string]bool
	variantLabels    map[[4]string]bool
	// lastDecision is each variant's [action, rule] series of DecisionInfo,
	// deleted when the decision changes so one series per variant remains.
	lastDecision map[[4]string][2]string
	groupLabels  map[[2]string]bool
	// metricsLabels are the groups with a MetricsOK series.
	metricsLabels map[[2]string]bool
	// rateGroups and rateVariants are the groups and variants with plan
	// rate series.
	rateGroups   map[[2]string]bool
	rateVariants map[[4]string]bool
}

var variantLabelNames = []string{llmdv1alpha1.MetricLabelVariantName, "namespace", "model_id", "accelerator"}

// NewMetrics creates and registers the engine metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DesiredReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: llmdv1alpha1.MetricDesiredReplicas,
			Help: "Replicas wva decided for the variant (the value served to its HPA)."}, variantLabelNames),
		CurrentReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_current_replicas",
			Help: "Replicas of the variant's scale target (spec.replicas) when the decision was made."}, variantLabelNames),
		DesiredRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_desired_ratio",
			Help: "Desired over current replicas (desired when current is 0)."}, variantLabelNames),
		VariantCost: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_variant_cost",
			Help: "Cost of one replica of the variant (spec.variantCost); times wva_current_replicas gives the variant's cost rate."}, variantLabelNames),
		DecisionInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_variant_decision_info",
			Help: "1 for the action and rule of the variant's latest decision (one series per variant)."}, append(append([]string{}, variantLabelNames...), "action", "rule")),
		AvgSpareKv: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_saturation_avg_spare_kv",
			Help: "Average spare KV cache fraction over non-saturated replicas of the model."}, []string{"namespace", "model_id"}),
		AvgSpareQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_saturation_avg_spare_queue",
			Help: "Average spare queue slots over non-saturated replicas of the model."}, []string{"namespace", "model_id"}),
		MetricsOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_metrics_available",
			Help: "1 when the model's metrics were collected this cycle (its VAs' MetricsAvailable=True), 0 when not: Prometheus unreachable, series absent, or the request counter missing."},
			[]string{"namespace", "model_id"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_decisions_total",
			Help: "Per-variant decisions by action and by the rule that made them."}, []string{"action", "rule"}),
		CycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wva_engine_cycle_duration_seconds",
			Help: "Duration of one engine cycle (collect, decide, publish).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		QueryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_prometheus_query_errors_total",
			Help: "Failed Prometheus queries, by query."}, []string{"query"}),
		DroppedSamples: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_prometheus_dropped_samples_total",
			Help: "Prometheus samples dropped, by query and reason (not_finite, negative, above_max: beyond the value's physical bound, no_target: no pod or model label, bad_labels)."},
			[]string{"query", "reason"}),
		QueriesPerCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_prometheus_queries_per_cycle",
			Help: "PromQL queries the last cycle ran."}),
		LastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_engine_last_success_timestamp_seconds",
			Help: "Unix time of the last cycle that collected metrics and published every decision."}),
		StatusWriteErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "wva_status_write_errors_total",
			Help: "VariantAutoscaling status writes that failed after retries."}),
		SharedTargetVariants: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_shared_scale_target_variants",
			Help: "Variants the last cycle did not decide because another variant scales the same target (TargetResolved=False, SharedScaleTarget)."}),
		DeletionCostPatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_pod_deletion_cost_patches_total",
			Help: "Pods whose controller.kubernetes.io/pod-deletion-cost the engine set before a scale-down (result=ok), and variants whose patches failed (result=error)."},
			[]string{"result"}),
		Unbudgeted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_variant_unbudgeted",
			Help: "1 for each variant whose scale-ups no GPU budget pool fully checks, by reason (NoPool, UnknownPool, NoGPUMemoryPerReplica; the GPUBudgeted condition's reason); only with a budget source."},
			[]string{"namespace", llmdv1alpha1.MetricLabelVariantName, "reason"}),
		PlanArrivals: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_plan_arrival_requests_per_second",
			Help: "Requests per second arriving for the model, as its analyzer read them (analyzers that plan by request rate: slo-planner)."}, []string{"namespace", "model_id"}),
		PlanRequired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_plan_required_requests_per_second",
			Help: "Request rate the analyzer sized the model's fleet for: demand, backlog, margins and the held peak (slo-planner)."}, []string{"namespace", "model_id"}),
		PlanSupply: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_plan_supply_requests_per_second",
			Help: "Request rate the model's current replicas serve within the SLO by the analyzer's model (slo-planner)."}, []string{"namespace", "model_id"}),
		PlanReplicaRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_plan_replica_requests_per_second",
			Help: "Request rate the analyzer credits one replica of the variant within the SLO (slo-planner); compare with wva simulate capacity or a load test."}, variantLabelNames),
		rateGroups:       map[[2]string]bool{},
		rateVariants:     map[[4]string]bool{},
		unbudgetedLabels: map[[3]string]bool{},
		variantLabels:    map[[4]string]bool{},
		lastDecision:     map[[4]string][2]string{},
		groupLabels:      map[[2]string]bool{},
		metricsLabels:    map[[2]string]bool{},
	}
	// Every query's error counter exists from the start at 0: a series that
	// first appears at 1 has no increase to rate(), so an alert on
	// rate(wva_prometheus_query_errors_total[5m]) would miss the first outage.
	for _, q := range collector.Queries(collector.DefaultLabels(), nil, []time.Duration{time.Minute}) {
		m.QueryErrors.WithLabelValues(q.Name)
	}
	m.QueryErrors.WithLabelValues(deletioncost.QueryRequestsRunning)
	m.DeletionCostPatches.WithLabelValues("ok")
	m.DeletionCostPatches.WithLabelValues("error")
	reg.MustRegister(m.DesiredReplicas, m.CurrentReplicas, m.DesiredRatio, m.VariantCost, m.DecisionInfo, m.AvgSpareKv, m.AvgSpareQueue, m.MetricsOK, m.Decisions,
		m.CycleDuration, m.QueryErrors, m.DroppedSamples, m.QueriesPerCycle, m.LastSuccess, m.StatusWriteErrs, m.SharedTargetVariants,
		m.DeletionCostPatches, m.Unbudgeted, m.PlanArrivals, m.PlanRequired, m.PlanSupply, m.PlanReplicaRate)
	return m
}

// PublishUnbudgeted sets wva_variant_unbudgeted to 1 for each [namespace,
// variant_name, reason] and deletes the series of the last call not in it.
func (m *Metrics) PublishUnbudgeted(unbudgeted [][3]string) {
	if m == nil {
		return
	}
	seen := map[[3]string]bool{}
	for _, l := range unbudgeted {
		seen[l] = true
		m.Unbudgeted.WithLabelValues(l[:]...).Set(1)
	}
	for l := range m.unbudgetedLabels {
		if !seen[l] {
			m.Unbudgeted.DeleteLabelValues(l[:]...)
		}
	}
	m.unbudgetedLabels = seen
}

// VariantSample is one variant's published decision.
type VariantSample struct {
	Labels  [4]string // variant_name, namespace, model_id, accelerator
	Desired int32
	Current int32
	// Cost is the cost of one replica (spec.variantCost).
	Cost   float64
	Target decision.Target
	// ReplicaRate is the rate the analyzer credits one replica (req/s)
	// when HasReplicaRate (analyzer.RateReporter).
	ReplicaRate    float64
	HasReplicaRate bool
}

// GroupSample is one group's analysis figures.
type GroupSample struct {
	Labels        [2]string // namespace, model_id
	AvgSpareKv    float64
	AvgSpareQueue float64
	HasAnalysis   bool
	// MetricsAvailable is the group's MetricsAvailable condition status.
	MetricsAvailable bool
	// Rates are the analyzer's figures in requests per second; nil when
	// it does not plan by request rate.
	Rates *analyzer.Rates
}

// Publish sets the per-variant and per-group gauges of a cycle and deletes
// the series of variants and groups that no longer exist.
func (m *Metrics) Publish(variants []VariantSample, groups []GroupSample) {
	seenV := map[[4]string]bool{}
	for _, v := range variants {
		l := v.Labels[:]
		seenV[v.Labels] = true
		m.DesiredReplicas.WithLabelValues(l...).Set(float64(v.Desired))
		m.CurrentReplicas.WithLabelValues(l...).Set(float64(v.Current))
		ratio := float64(v.Desired)
		if v.Current > 0 {
			ratio = float64(v.Desired) / float64(v.Current)
		}
		m.DesiredRatio.WithLabelValues(l...).Set(ratio)
		m.VariantCost.WithLabelValues(l...).Set(v.Cost)
		decision := [2]string{string(v.Target.Action), string(v.Target.Rule)}
		if prev, ok := m.lastDecision[v.Labels]; ok && prev != decision {
			m.DecisionInfo.DeleteLabelValues(append(l[:4:4], prev[:]...)...)
		}
		m.lastDecision[v.Labels] = decision
		m.DecisionInfo.WithLabelValues(append(l[:4:4], decision[:]...)...).Set(1)
		m.Decisions.WithLabelValues(string(v.Target.Action), string(v.Target.Rule)).Inc()
	}
	for l := range m.variantLabels {
		if !seenV[l] {
			m.DesiredReplicas.DeleteLabelValues(l[:]...)
			m.CurrentReplicas.DeleteLabelValues(l[:]...)
			m.DesiredRatio.DeleteLabelValues(l[:]...)
			m.VariantCost.DeleteLabelValues(l[:]...)
			prev := m.lastDecision[l]
			m.DecisionInfo.DeleteLabelValues(append(l[:], prev[:]...)...)
			delete(m.lastDecision, l)
		}
	}
	m.variantLabels = seenV

	rated := map[[4]string]bool{}
	for _, v := range variants {
		if v.HasReplicaRate {
			rated[v.Labels] = true
			m.PlanReplicaRate.WithLabelValues(v.Labels[:]...).Set(v.ReplicaRate)
		}
	}
	for l := range m.rateVariants {
		if !rated[l] {
			m.PlanReplicaRate.DeleteLabelValues(l[:]...)
		}
	}
	m.rateVariants = rated

	seenM := map[[2]string]bool{}
	for _, g := range groups {
		seenM[g.Labels] = true
		ok := 0.0
		if g.MetricsAvailable {
			ok = 1
		}
		m.MetricsOK.WithLabelValues(g.Labels[:]...).Set(ok)
	}
	dropStaleGroups(m.metricsLabels, seenM, m.MetricsOK)
	m.metricsLabels = seenM

	seenG := map[[2]string]bool{}
	for _, g := range groups {
		if !g.HasAnalysis {
			continue
		}
		seenG[g.Labels] = true
		m.AvgSpareKv.WithLabelValues(g.Labels[:]...).Set(g.AvgSpareKv)
		m.AvgSpareQueue.WithLabelValues(g.Labels[:]...).Set(g.AvgSpareQueue)
	}
	dropStaleGroups(m.groupLabels, seenG, m.AvgSpareKv, m.AvgSpareQueue)
	m.groupLabels = seenG

	seenR := map[[2]string]bool{}
	for _, g := range groups {
		if g.Rates == nil {
			continue
		}
		seenR[g.Labels] = true
		m.PlanArrivals.WithLabelValues(g.Labels[:]...).Set(g.Rates.Arrivals)
		m.PlanRequired.WithLabelValues(g.Labels[:]...).Set(g.Rates.Required)
		m.PlanSupply.WithLabelValues(g.Labels[:]...).Set(g.Rates.Supply)
	}
	dropStaleGroups(m.rateGroups, seenR, m.PlanArrivals, m.PlanRequired, m.PlanSupply)
	m.rateGroups = seenR
}

// dropStaleGroups deletes the series of the groups that had one last cycle
// (prev) and have none this cycle (seen).
func dropStaleGroups(prev, seen map[[2]string]bool, vecs ...*prometheus.GaugeVec) {
	for l := range prev {
		if seen[l] {
			continue
		}
		for _, v := range vecs {
			v.DeleteLabelValues(l[:]...)
		}
	}
}
