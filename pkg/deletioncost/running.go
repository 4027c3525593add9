package deletioncost

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	"github.com/wva-project/wva/pkg/collector"
)

// MetricRequestsRunning is vLLM's gauge of requests in the running batch;
// MetricSGLangRunning is SGLang's (python/sglang/srt/metrics/collector.py).
const (
	MetricRequestsRunning = "vllm:num_requests_running"
	MetricSGLangRunning   = "sglang:num_running_reqs"
)

// QueryRequestsRunning names the query in wva_prometheus_query_errors_total.
const QueryRequestsRunning = "requests_running"

// RunningQuery is each pod's running requests now, vLLM's or SGLang's
// gauge, in the namespaces given (all when empty), selected as the
// collector's queries are.
func RunningQuery(labels collector.Labels, namespaces []string) string {
	sel := "__name__=~" + collector.QuoteLabelValue(MetricRequestsRunning+"|"+MetricSGLangRunning)
	if m := collector.NamespaceMatcher(labels, namespaces); m != "" {
		sel += "," + m
	}
	return fmt.Sprintf("max by (%s, %s) ({%s})", labels.Namespace, labels.Pod, sel)
}

// Prometheus reads the running requests per pod. It is queried only on a
// cycle that decides a scale-down, so the collector's fixed set of queries
// per cycle stays as it is.
type Prometheus struct {
	API    collector.Querier
	Labels collector.Labels
}

// RequestsRunning runs RunningQuery at the given time. Samples without a
// pod label are skipped; NaN, infinite and negative ones are kept for
// Costs to reject.
func (p Prometheus) RequestsRunning(ctx context.Context, namespaces []string, at time.Time) (map[collector.PodKey]float64, error) {
	value, _, _, err := p.API.Query(ctx, RunningQuery(p.Labels, namespaces), at)
	if err != nil {
		return nil, &collector.QueryError{Query: QueryRequestsRunning, Err: err}
	}
	vec, ok := value.(model.Vector)
	if !ok {
		return nil, &collector.QueryError{Query: QueryRequestsRunning, Err: fmt.Errorf("want an instant vector, got %s", value.Type())}
	}
	out := make(map[collector.PodKey]float64, len(vec))
	for _, s := range vec {
		key := collector.PodKey{Namespace: string(s.Metric[model.LabelName(p.Labels.Namespace)]), Pod: string(s.Metric[model.LabelName(p.Labels.Pod)])}
		if key.Pod == "" {
			continue
		}
		out[key] = float64(s.Value)
	}
	return out, nil
}
