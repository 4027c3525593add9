// Package collector reads the vLLM metrics the analyzers need from
// Prometheus: a fixed set of queries per engine cycle, results keyed by pod
// (or by model for request counts). It is the pipeline's only Prometheus I/O.
package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// PodKey identifies a serving pod.
type PodKey struct {
	Namespace string
	Pod       string
}

// ModelKey identifies a model's series in one namespace.
type ModelKey struct {
	Namespace string
	Model     string
}

// PodMetrics is what one pod reported over the collection windows. The Has*
// fields say whether a value was present.
type PodMetrics struct {
	KvCacheUsage    float64
	HasKvCacheUsage bool
	QueueLength     float64
	HasQueueLength  bool
	// KV capacity from vllm:cache_config_info.
	NumGPUBlocks int64
	BlockSize    int64
	// Averages over 5m; zero when the pod served no request.
	AvgInputTokens  float64
	AvgOutputTokens float64
	// PrefixCacheHitRate is prefix cache hits / queries over 5m, 0..1;
	// zero when the pod looked nothing up (or caching is off).
	PrefixCacheHitRate float64
	// ArrivalRate is completed requests per second over RateWindow (see
	// QueryArrivalRate); AvgTTFTms and AvgITLms are mean time to first
	// token and inter-token latency over RateWindow, in milliseconds as the
	// SLO analyzer reads them; zero when the pod observed none.
	ArrivalRate float64
	AvgTTFTms   float64
	AvgITLms    float64
}

// Reporting says whether the pod exports the saturation inputs.
func (p PodMetrics) Reporting() bool { return p.HasKvCacheUsage && p.HasQueueLength }

// Result is one collection cycle.
type Result struct {
	Pods map[PodKey]PodMetrics
	// Requests holds successful requests per model over each window.
	Requests map[time.Duration]map[ModelKey]float64
	// SchedulerQueues is the EPP flow-control queue per model. The EPP has
	// no namespace label: Namespace is the scrape's namespace label (the
	// EPP pod's), "" when the scrape does not add one.
	SchedulerQueues map[ModelKey]EPPQueue
	// GatewayArrivals is the EPP's request rate per model (req/s over
	// RateWindow), keyed like SchedulerQueues.
	GatewayArrivals map[ModelKey]float64
	// Queries is how many PromQL queries the cycle ran.
	Queries int
	// Dropped counts samples rejected as NaN, infinite, negative or out of
	// range, by query name.
	Dropped map[string]int
	// Warnings are Prometheus' own warnings.
	Warnings []string
}

// RequestsOver returns a model's successful requests over a retention
// period (counted over IdleWindow(period), the window queried), and whether
// the model had a series in it. A missing series is not zero requests: vLLM
// exports the counter from start-up, so with pods up it is a scraping
// fault; the caller decides what it means.
func (r Result) RequestsOver(period time.Duration, key ModelKey) (float64, bool) {
	n, ok := r.Requests[IdleWindow(period)][key]
	return n, ok
}

// GatewayArrivalsFor is the gateway's request rate for a model served in
// namespace, and whether any EPP series reported it: series from that
// namespace plus series without a namespace label, as SchedulerQueueFor.
func (r Result) GatewayArrivalsFor(namespace, model string) (float64, bool) {
	rate, ok := r.GatewayArrivals[ModelKey{Namespace: namespace, Model: model}]
	if namespace != "" {
		if anyNS, found := r.GatewayArrivals[ModelKey{Model: model}]; found {
			rate, ok = rate+anyNS, true
		}
	}
	return rate, ok
}

// EPPQueue is what an EPP's flow-control queue holds for a model.
type EPPQueue struct {
	Size  float64
	Bytes float64
}

// SchedulerQueueFor is the EPP queue of a model served in namespace: series
// from that namespace, plus series without a namespace label (which cannot
// be told apart, so they count for every namespace serving the model).
func (r Result) SchedulerQueueFor(namespace, model string) EPPQueue {
	q := r.SchedulerQueues[ModelKey{Namespace: namespace, Model: model}]
	if namespace != "" {
		anyNS := r.SchedulerQueues[ModelKey{Model: model}]
		q.Size += anyNS.Size
		q.Bytes += anyNS.Bytes
	}
	return q
}

// Querier is the part of the Prometheus API client the collector uses.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error)
}

// Collector runs the cycle's queries against Prometheus.
type Collector struct {
	API    Querier
	Labels Labels
}

// Request says what one cycle needs.
type Request struct {
	// Namespaces that hold VAs; empty means every namespace.
	Namespaces []string
	// RetentionWindows are the scale-to-zero retention periods in force;
	// each is queried over its IdleWindow.
	RetentionWindows []time.Duration
	// Time is the evaluation time of every query.
	Time time.Time
}

// Collect runs every query. Any failed query fails the cycle: decisions on a
// partial view (say, KV without queue) would be wrong in ways the fallback
// path handles better.
func (c Collector) Collect(ctx context.Context, req Request) (Result, error) {
	res := Result{
		Pods:            map[PodKey]PodMetrics{},
		Requests:        map[time.Duration]map[ModelKey]float64{},
		SchedulerQueues: map[ModelKey]EPPQueue{},
		GatewayArrivals: map[ModelKey]float64{},
		Dropped:         map[string]int{},
	}
	for _, q := range Queries(c.Labels, req.Namespaces, req.RetentionWindows) {
		res.Queries++
		value, warnings, _, err := c.API.Query(ctx, q.Expr, req.Time)
		res.Warnings = append(res.Warnings, warnings...)
		if err != nil {
			return res, &QueryError{Query: q.Name, Err: err}
		}
		vec, ok := value.(model.Vector)
		if !ok {
			return res, &QueryError{Query: q.Name, Err: fmt.Errorf("want an instant vector, got %s", value.Type())}
		}
		c.absorb(&res, q, vec)
	}
	return res, nil
}

func (c Collector) absorb(res *Result, q Query, vec model.Vector) {
	nsLabel := model.LabelName(c.Labels.Namespace)
	switch q.Name {
	case QueryRequestCount:
		byModel := map[ModelKey]float64{}
		for _, s := range vec {
			v := float64(s.Value)
			if !finite(v) || v < 0 {
				res.Dropped[q.Name]++
				continue
			}
			key := ModelKey{Namespace: string(s.Metric[nsLabel]), Model: string(s.Metric[LabelModelName])}
			byModel[key] += v
		}
		res.Requests[q.Window] = byModel
		return
	case QueryEPPQueueSize, QueryEPPQueueBytes, QueryGatewayArrivals:
		for _, s := range vec {
			v := float64(s.Value)
			m := string(s.Metric[LabelTargetModelName])
			if m == "" {
				m = string(s.Metric[LabelModelName])
			}
			if m == "" || !finite(v) || v < 0 {
				res.Dropped[q.Name]++
				continue
			}
			key := ModelKey{Namespace: string(s.Metric[nsLabel]), Model: m}
			if q.Name == QueryGatewayArrivals {
				res.GatewayArrivals[key] += v
				continue
			}
			eq := res.SchedulerQueues[key]
			if q.Name == QueryEPPQueueSize {
				eq.Size += v
			} else {
				eq.Bytes += v
			}
			res.SchedulerQueues[key] = eq
		}
		return
	}
	for _, s := range vec {
		key := PodKey{Namespace: string(s.Metric[nsLabel]), Pod: string(s.Metric[model.LabelName(c.Labels.Pod)])}
		v := float64(s.Value)
		if math.IsNaN(v) && meanQuery(q.Name) {
			continue // 0/0: the pod served no request in the window
		}
		if key.Pod == "" || !valid(q.Name, v) {
			res.Dropped[q.Name]++
			continue
		}
		pm := res.Pods[key]
		switch q.Name {
		case QueryKvCacheUsage:
			pm.KvCacheUsage, pm.HasKvCacheUsage = v, true
		case QueryQueueLength:
			pm.QueueLength, pm.HasQueueLength = v, true
		case QueryCacheConfigInfo:
			blocks, err1 := strconv.ParseInt(string(s.Metric["num_gpu_blocks"]), 10, 64)
			size, err2 := strconv.ParseInt(string(s.Metric["block_size"]), 10, 64)
			if err1 != nil || err2 != nil || blocks <= 0 || size <= 0 {
				res.Dropped[q.Name]++
				continue
			}
			pm.NumGPUBlocks, pm.BlockSize = blocks, size
		case QueryAvgInputTokens:
			pm.AvgInputTokens = v
		case QueryAvgOutputTokens:
			pm.AvgOutputTokens = v
		case QueryPrefixCacheHit:
			pm.PrefixCacheHitRate = v
		case QueryArrivalRate:
			pm.ArrivalRate = v
		case QueryAvgTTFT:
			pm.AvgTTFTms = v * 1000 // vLLM observes seconds
		case QueryAvgITL:
			pm.AvgITLms = v * 1000
		}
		res.Pods[key] = pm
	}
}

// meanQuery reports whether the query divides two rates, whose 0/0 (NaN)
// means "nothing observed" rather than a bad sample.
func meanQuery(name string) bool {
	switch name {
	case QueryAvgInputTokens, QueryAvgOutputTokens, QueryAvgTTFT, QueryAvgITL, QueryPrefixCacheHit:
		return true
	}
	return false
}

// valid rejects NaN, infinities, negatives, and ratios above 1.
func valid(query string, v float64) bool {
	if !finite(v) || v < 0 {
		return false
	}
	return (query != QueryKvCacheUsage && query != QueryPrefixCacheHit) || v <= 1
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// QueryError says which query failed.
type QueryError struct {
	Query string
	Err   error
}

func (e *QueryError) Error() string { return fmt.Sprintf("prometheus query %s: %v", e.Query, e.Err) }

func (e *QueryError) Unwrap() error { return e.Err }

// IsQueryError reports whether err came from a Prometheus query.
func IsQueryError(err error) bool {
	var qe *QueryError
	return errors.As(err, &qe)
}
