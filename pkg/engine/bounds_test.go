package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision/params"
)

// promAnswers is a Prometheus fake for the collector: each query gets the
// samples of the first metric name it contains.
type promAnswers map[string]model.Vector

func (p promAnswers) Query(_ context.Context, q string, _ time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	for metric, vec := range p {
		if strings.Contains(q, metric) {
			return vec, nil, nil, nil
		}
	}
	return model.Vector{}, nil, nil, nil
}

func promSample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

// twoPodFleet is Prometheus's answers for model llama's two pods p1 and p2
// in namespace prod: 6 req/s each of 800 prompt and 200 output tokens at
// 40 ms ITL, KV half full, nothing waiting, and 12 req/s at the gateway.
func twoPodFleet() promAnswers {
	pod := func(v float64, name string) *model.Sample { return promSample(v, "namespace", "prod", "pod", name) }
	both := func(v float64) model.Vector { return model.Vector{pod(v, "p1"), pod(v, "p2")} }
	return promAnswers{
		"kv_cache_usage_perc":  both(0.5),
		"num_requests_waiting": both(0),
		"cache_config_info": {
			promSample(1, "namespace", "prod", "pod", "p1", "num_gpu_blocks", "2048", "block_size", "16"),
			promSample(1, "namespace", "prod", "pod", "p2", "num_gpu_blocks", "2048", "block_size", "16"),
		},
		"request_prompt_tokens":               both(800),
		"request_generation_tokens":           both(200),
		"rate(vllm:request_success_total":     both(6),
		"time_to_first_token_seconds":         both(0.3),
		"inter_token_latency_seconds":         both(0.04),
		"inference_objective_request_total":   {promSample(12, "namespace", "prod", "target_model_name", "llama")},
		"increase(vllm:request_success_total": {promSample(7200, "namespace", "prod", "model_name", "llama")},
	}
}

// One absurd but finite series (1.7e308) can turn the slo-planner's plan
// into NaN and keep at two a group that needs more than two replicas.
// Through the real collector, BuildPlans and the default pipeline, the
// group still scales up whichever series is absurd.
func TestAbsurdSeriesStillScalesUp(t *testing.T) {
	const huge = 1.7e308
	pod := func(v float64, name string) *model.Sample { return promSample(v, "namespace", "prod", "pod", name) }
	tests := []struct {
		name   string
		metric string
		absurd *model.Sample // replaces p2's sample, or is added (gateway)
	}{
		{"baseline", "", nil},
		{"avg input tokens", "request_prompt_tokens", pod(huge, "p2")},
		{"avg output tokens", "request_generation_tokens", pod(huge, "p2")},
		{"arrival rate", "rate(vllm:request_success_total", pod(huge, "p2")},
		{"queue length", "num_requests_waiting", pod(huge, "p2")},
		{"ttft", "time_to_first_token_seconds", pod(huge, "p2")},
		{"itl", "inter_token_latency_seconds", pod(huge, "p2")},
		{"gateway arrivals", "inference_objective_request_total", promSample(huge, "target_model_name", "llama")},
		{"scheduler queue", "flow_control_queue_size", promSample(huge, "namespace", "prod", "target_model_name", "llama")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prom := twoPodFleet()
			switch {
			case tt.absurd == nil:
			case tt.metric == "inference_objective_request_total" || tt.metric == "flow_control_queue_size":
				prom[tt.metric] = append(prom[tt.metric], tt.absurd)
			default:
				prom[tt.metric] = model.Vector{prom[tt.metric][0], tt.absurd}
			}
			target := resolved(2, "p1", "p2")
			target.MaxNumSeqs, target.StartupDelay = 64, 2*time.Minute
			views := []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 20), Target: target}}
			res, err := collector.Collector{API: prom, Labels: collector.DefaultLabels()}.Collect(context.Background(),
				collector.Request{Namespaces: namespacesOf(views), RetentionWindows: Windows(views, defaults), Time: t0})
			require.NoError(t, err)
			plans := decide.BuildPlans(views, res, nil, defaults)
			require.Len(t, plans, 1)
			out := decide.Default().Run(t0, []decide.GroupInput{plans[0].Input})
			require.NoError(t, out[0].Err)
			require.Len(t, out[0].Targets, 1)
			got := out[0].Targets[0]
			assert.Greater(t, got.Replicas, int32(2), "12 req/s needs more than two replicas: %s (%s)", got.Reason, got.Rule)
		})
	}
}

// A cycle of the default slo-planner through the real collector exports
// what it planned by: the gateway's 12 req/s, a required rate with its
// margin above them, and the rate it credits an L4 replica.
func TestRunOncePublishesPlanRates(t *testing.T) {
	prom := twoPodFleet()
	target := resolved(2, "p1", "p2")
	target.MaxNumSeqs, target.StartupDelay = 64, 2*time.Minute
	reg := prometheus.NewRegistry()
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 20), Target: target}}},
		Metrics: collector.Collector{API: prom, Labels: collector.DefaultLabels()},
		Status:  &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}, Config: config.NewStore(),
		Pipeline: decide.Default(), Observe: NewMetrics(reg), Clock: clocktesting.NewFakeClock(t0), Interval: 30 * time.Second}
	c, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	require.Len(t, c.Results, 1)
	require.Equal(t, params.AnalyzerSLOPlanner, c.Results[0].Analyzer)

	group := []string{"prod", "llama"}
	assert.InDelta(t, 12, testutil.ToFloat64(e.Observe.PlanArrivals.WithLabelValues(group...)), 1e-9, "the gateway's arrivals")
	required := testutil.ToFloat64(e.Observe.PlanRequired.WithLabelValues(group...))
	assert.Greater(t, required, 12.0, "the plan's margin over the arrivals")
	perReplica := testutil.ToFloat64(e.Observe.PlanReplicaRate.WithLabelValues("l4", "prod", "llama", ""))
	assert.Positive(t, perReplica)
	assert.InDelta(t, 2*perReplica, testutil.ToFloat64(e.Observe.PlanSupply.WithLabelValues(group...)), 1e-9, "two replicas' supply")
	got := c.Results[0].Targets[0].Replicas
	assert.GreaterOrEqual(t, float64(got)*perReplica, required-1e-9, "the replicas decided cover the required rate")
}
