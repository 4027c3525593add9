// Package provider serves wva's decisions of record (VariantAutoscaling
// status, read from an informer cache) as the external metric
// wva_desired_replicas. It has no Prometheus client and runs no analyzer:
// every adapter replica serves, only the leader decides.
package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

var metricResource = schema.GroupResource{Group: "external.metrics.k8s.io", Resource: llmdv1alpha1.MetricDesiredReplicas}

// Provider implements the custom-metrics-apiserver ExternalMetricsProvider.
type Provider struct {
	VAs   llmdlisters.VariantAutoscalingLister
	Clock clock.PassiveClock
	// StaleAfter is the age past which a served decision counts as stale.
	// It is still served: the HPA then holds the last decision, which is
	// safer than an error storm or a guess.
	StaleAfter time.Duration

	served *prometheus.CounterVec
}

// New returns a provider and registers its metrics.
func New(vas llmdlisters.VariantAutoscalingLister, clk clock.PassiveClock, staleAfter time.Duration, reg prometheus.Registerer) *Provider {
	p := &Provider{VAs: vas, Clock: clk, StaleAfter: staleAfter,
		served: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_external_metric_requests_total",
			Help: "wva_desired_replicas requests by result (ok, stale, not_found, no_decision, bad_request)."}, []string{"result"}),
	}
	reg.MustRegister(p.served, &ageCollector{p: p})
	return p
}

// GetExternalMetric implements cmprovider.ExternalMetricsProvider.
func (p *Provider) GetExternalMetric(_ context.Context, namespace string, selector labels.Selector,
	info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if info.Metric != llmdv1alpha1.MetricDesiredReplicas {
		p.served.WithLabelValues("not_found").Inc()
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "external.metrics.k8s.io", Resource: info.Metric},
			fmt.Sprintf("wva serves only %q", llmdv1alpha1.MetricDesiredReplicas))
	}
	name, ok := variantName(selector)
	if !ok {
		p.served.WithLabelValues("bad_request").Inc()
		return nil, apierrors.NewBadRequest(fmt.Sprintf(
			"%s needs a labelSelector naming one VariantAutoscaling: %s=<name> (got %q)", llmdv1alpha1.MetricDesiredReplicas, llmdv1alpha1.MetricLabelVariantName, selector.String()))
	}
	va, err := DecisionOf(p.VAs, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		p.served.WithLabelValues("not_found").Inc()
		return nil, apierrors.NewNotFound(metricResource, fmt.Sprintf("VariantAutoscaling %s/%s", namespace, name))
	case errors.Is(err, ErrNoDecision):
		// An error makes the HPA hold its replicas (ScalingActive=False)
		// rather than act on a made-up value.
		p.served.WithLabelValues("no_decision").Inc()
		return nil, apierrors.NewServiceUnavailable(err.Error())
	case err != nil:
		return nil, apierrors.NewInternalError(err)
	}
	alloc := va.Status.DesiredOptimizedAlloc
	result := "ok"
	if age := p.Clock.Since(alloc.LastRunTime.Time); p.StaleAfter > 0 && age > p.StaleAfter {
		result = "stale"
		klog.V(1).InfoS("serving a stale decision", "va", klog.KObj(va), "age", age.Round(time.Second), "desired", alloc.NumReplicas)
	}
	p.served.WithLabelValues(result).Inc()
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{
		MetricName:   llmdv1alpha1.MetricDesiredReplicas,
		MetricLabels: map[string]string{llmdv1alpha1.MetricLabelVariantName: va.Name},
		Timestamp:    alloc.LastRunTime,
		Value:        *resource.NewQuantity(int64(va.ServedReplicas()), resource.DecimalSI),
	}}}, nil
}

// ErrNoDecision: the VA exists but the engine has not published a decision
// for it yet. Servers answer "unavailable" so the scaler holds replicas.
var ErrNoDecision = errors.New("no decision yet")

// DecisionOf returns the VA holding the decision of record for
// namespace/name (status.desiredOptimizedAlloc), the lister's NotFound
// error, or an error wrapping ErrNoDecision. Every server of the decision
// (external metrics API, KEDA external scaler) reads it here.
func DecisionOf(vas llmdlisters.VariantAutoscalingLister, namespace, name string) (*llmdv1alpha1.VariantAutoscaling, error) {
	va, err := vas.VariantAutoscalings(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	if va.Status.DesiredOptimizedAlloc.LastRunTime.IsZero() {
		return va, fmt.Errorf("%w for VariantAutoscaling %s/%s; see its status conditions", ErrNoDecision, namespace, name)
	}
	return va, nil
}

// ListAllExternalMetrics implements cmprovider.ExternalMetricsProvider.
func (p *Provider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	return []cmprovider.ExternalMetricInfo{{Metric: llmdv1alpha1.MetricDesiredReplicas}}
}

func variantName(selector labels.Selector) (string, bool) {
	if selector == nil {
		return "", false
	}
	for _, key := range []string{llmdv1alpha1.MetricLabelVariantName, llmdv1alpha1.MetricLabelVariantAutoscaling} {
		if v, ok := selector.RequiresExactMatch(key); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// ageCollector exports each decision's age at scrape time, so dashboards and
// alerts see staleness even when no HPA asks.
type ageCollector struct{ p *Provider }

var ageDesc = prometheus.NewDesc("wva_decision_age_seconds",
	"Seconds since the decision served for the variant was last confirmed (status lastRunTime).",
	[]string{"namespace", llmdv1alpha1.MetricLabelVariantName}, nil)

func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ageDesc }

func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	vas, err := c.p.VAs.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.p.Clock.Now()
	for _, va := range vas {
		t := va.Status.DesiredOptimizedAlloc.LastRunTime
		if t.IsZero() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, now.Sub(t.Time).Seconds(), va.Namespace, va.Name)
	}
}
