package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/deletioncost"
)

// The cost gauge follows the variant: set per cycle, gone with the variant,
// so cost-per-hour panels (wva_current_replicas * wva_variant_cost) never
// multiply against a deleted variant's last value.
func TestMetricsVariantCost(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cheap := VariantSample{Labels: [4]string{"cheap", "prod", "m", "L4"}, Desired: 2, Current: 1, Cost: 5,
		Target: decision.Target{Action: decision.ActionScaleUp, Rule: decision.RuleSteady}}
	dear := VariantSample{Labels: [4]string{"dear", "prod", "m", "H100"}, Desired: 1, Current: 1, Cost: 40.5,
		Target: decision.Target{Action: decision.ActionNone, Rule: decision.RuleSteady}}
	m.Publish([]VariantSample{cheap, dear}, nil)

	want := `
# HELP wva_variant_cost Cost of one replica of the variant (spec.variantCost); times wva_current_replicas gives the variant's cost rate.
# TYPE wva_variant_cost gauge
wva_variant_cost{accelerator="H100",model_id="m",namespace="prod",variant_name="dear"} 40.5
wva_variant_cost{accelerator="L4",model_id="m",namespace="prod",variant_name="cheap"} 5
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "wva_variant_cost"))

	m.Publish([]VariantSample{cheap}, nil)
	require.Equal(t, 1, testutil.CollectAndCount(m.VariantCost), "a deleted variant's cost series must go")
	require.InDelta(t, 5, testutil.ToFloat64(m.VariantCost.WithLabelValues(cheap.Labels[:]...)), 0)
}

// The decision info gauge holds one series per variant, carrying its latest
// action and rule: a changed decision replaces the series, a deleted
// variant removes it.
func TestMetricsDecisionInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	v := VariantSample{Labels: [4]string{"cheap", "prod", "m", "L4"}, Desired: 2, Current: 1,
		Target: decision.Target{Action: decision.ActionScaleUp, Rule: decision.RuleScaleUp}}
	m.Publish([]VariantSample{v}, nil)
	v.Target = decision.Target{Action: decision.ActionNone, Rule: decision.RuleSteady}
	m.Publish([]VariantSample{v}, nil)

	want := `
# HELP wva_variant_decision_info 1 for the action and rule of the variant's latest decision (one series per variant).
# TYPE wva_variant_decision_info gauge
wva_variant_decision_info{accelerator="L4",action="none",model_id="m",namespace="prod",rule="steady",variant_name="cheap"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "wva_variant_decision_info"))

	m.Publish(nil, nil)
	require.Equal(t, 0, testutil.CollectAndCount(m.DecisionInfo), "a deleted variant's decision series must go")
}

// Query error counters start at 0 for every query, so the first failure is
// an increase that rate() and the WVAPrometheusQueryErrors alert can see.
func TestMetricsQueryErrorsStartAtZero(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	names := map[string]bool{}
	for _, q := range collector.Queries(collector.DefaultLabels(), nil, []time.Duration{time.Minute, time.Hour}) {
		names[q.Name] = true
	}
	names[deletioncost.QueryRequestsRunning] = true // the query of scale-down cycles
	require.Equal(t, len(names), testutil.CollectAndCount(m.QueryErrors))
	for name := range names {
		require.Zero(t, testutil.ToFloat64(m.QueryErrors.WithLabelValues(name)), name)
	}
}

// A group planned by request rate exports its arrivals, the rate it was
// sized for and its supply, and each variant's credited rate per replica;
// the series go when the group or its rates do.
func TestMetricsPlanRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l4 := VariantSample{Labels: [4]string{"l4", "prod", "m", "L4"}, Desired: 3, Current: 2, ReplicaRate: 2.5, HasReplicaRate: true}
	h100 := VariantSample{Labels: [4]string{"h100", "prod", "m", "H100"}, Desired: 1, Current: 1, ReplicaRate: 6.25, HasReplicaRate: true}
	group := GroupSample{Labels: [2]string{"prod", "m"}, Rates: &analyzer.Rates{Arrivals: 9.5, Required: 12, Supply: 11.25}}
	m.Publish([]VariantSample{l4, h100}, []GroupSample{group})

	want := `
# HELP wva_plan_arrival_requests_per_second Requests per second arriving for the model, as its analyzer read them (analyzers that plan by request rate: slo-planner).
# TYPE wva_plan_arrival_requests_per_second gauge
wva_plan_arrival_requests_per_second{model_id="m",namespace="prod"} 9.5
# HELP wva_plan_replica_requests_per_second Request rate the analyzer credits one replica of the variant within the SLO (slo-planner); compare with wva simulate capacity or a load test.
# TYPE wva_plan_replica_requests_per_second gauge
wva_plan_replica_requests_per_second{accelerator="H100",model_id="m",namespace="prod",variant_name="h100"} 6.25
wva_plan_replica_requests_per_second{accelerator="L4",model_id="m",namespace="prod",variant_name="l4"} 2.5
# HELP wva_plan_required_requests_per_second Request rate the analyzer sized the model's fleet for: demand, backlog, margins and the held peak (slo-planner).
# TYPE wva_plan_required_requests_per_second gauge
wva_plan_required_requests_per_second{model_id="m",namespace="prod"} 12
# HELP wva_plan_supply_requests_per_second Request rate the model's current replicas serve within the SLO by the analyzer's model (slo-planner).
# TYPE wva_plan_supply_requests_per_second gauge
wva_plan_supply_requests_per_second{model_id="m",namespace="prod"} 11.25
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "wva_plan_arrival_requests_per_second",
		"wva_plan_required_requests_per_second", "wva_plan_supply_requests_per_second", "wva_plan_replica_requests_per_second"))

	// The group now runs an analyzer that does not plan by rate.
	l4.HasReplicaRate, h100.HasReplicaRate = false, false
	m.Publish([]VariantSample{l4, h100}, []GroupSample{{Labels: group.Labels, HasAnalysis: true}})
	for _, vec := range []*prometheus.GaugeVec{m.PlanArrivals, m.PlanRequired, m.PlanSupply, m.PlanReplicaRate} {
		require.Equal(t, 0, testutil.CollectAndCount(vec), "series of rates no longer reported must go")
	}
	require.Equal(t, 2, testutil.CollectAndCount(m.DesiredReplicas))
}
