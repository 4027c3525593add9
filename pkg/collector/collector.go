// Package collector reads the vLLM and SGLang metrics the analyzers need from
// Prometheus: a fixed set of queries per engine cycle, results keyed by pod
// (or by model for request counts). It is the pipeline's only Prometheus I/O.
package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/wva-project/wva/pkg/decision"
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
	// KV capacity from vllm:cache_config_info; an SGLang pod's
	// sglang:max_total_num_tokens is read as that many blocks of 1 token.
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
	// TPOT is the per-request time-per-output-token histogram's rate
	// over RateWindow (seconds), empty when the pod observed none.
	TPOT decision.Histogram
	// QueueTime is the per-request queue-time histogram's rate.
	QueueTime decision.Histogram
	// TTFT is the per-request time-to-first-token histogram's rate.
	TTFT decision.Histogram
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
	// Dropped counts the samples rejected, by query name and reason;
	// DroppedSamples lists them, for the log.
	Dropped        map[Drop]int
	DroppedSamples []DroppedSample
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

// ReplicaMetrics is a pod's metrics as the analyzers read them (without
// the pod's identity), and whether the pod reports the saturation inputs.
func (r Result) ReplicaMetrics(namespace, pod string) (decision.ReplicaMetrics, bool) {
	pm, ok := r.Pods[PodKey{Namespace: namespace, Pod: pod}]
	if !ok || !pm.Reporting() {
		return decision.ReplicaMetrics{}, false
	}
	return decision.ReplicaMetrics{
		KvCacheUsage: pm.KvCacheUsage, QueueLength: pm.QueueLength,
		NumGPUBlocks: pm.NumGPUBlocks, BlockSize: pm.BlockSize,
		AvgInputTokens: pm.AvgInputTokens, AvgOutputTokens: pm.AvgOutputTokens, PrefixCacheHitRate: pm.PrefixCacheHitRate,
		ArrivalRate: pm.ArrivalRate, AvgTTFTms: pm.AvgTTFTms, AvgITLms: pm.AvgITLms, TPOT: pm.TPOT, QueueTime: pm.QueueTime, TTFT: pm.TTFT,
	}, true
}

// SchedulerQueue is SchedulerQueueFor as plain values.
func (r Result) SchedulerQueue(namespace, model string) (size, bytes float64) {
	q := r.SchedulerQueueFor(namespace, model)
	return q.Size, q.Bytes
}

// RequestCount is RequestsOver for a model served in namespace.
func (r Result) RequestCount(period time.Duration, namespace, model string) (float64, bool) {
	return r.RequestsOver(period, ModelKey{Namespace: namespace, Model: model})
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
		Dropped:         map[Drop]int{},
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
	podLabel := model.LabelName(c.Labels.Pod)
	drop := func(s *model.Sample, reason string) {
		res.Dropped[Drop{Query: q.Name, Reason: reason}]++
		res.DroppedSamples = append(res.DroppedSamples, DroppedSample{Query: q.Name, Reason: reason,
			Namespace: string(s.Metric[nsLabel]), Pod: string(s.Metric[podLabel]), Model: modelOf(s.Metric), Value: float64(s.Value)})
	}
	switch q.Name {
	case QueryRequestCount:
		byModel := map[ModelKey]float64{}
		for _, s := range vec {
			v := float64(s.Value)
			if reason := Reject(q.Name, v); reason != "" {
				drop(s, reason)
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
			m := modelOf(s.Metric)
			reason := Reject(q.Name, v)
			if reason == "" && m == "" {
				reason = ReasonNoTarget
			}
			if reason != "" {
				drop(s, reason)
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
	var hist map[PodKey][]bucket // a histogram query's buckets by pod
	for _, s := range vec {
		key := PodKey{Namespace: string(s.Metric[nsLabel]), Pod: string(s.Metric[podLabel])}
		v := float64(s.Value)
		if math.IsNaN(v) && meanQuery(q.Name) {
			continue // 0/0: the pod served no request in the window
		}
		reason := Reject(q.Name, v)
		if reason == "" && key.Pod == "" {
			reason = ReasonNoTarget
		}
		if reason != "" {
			drop(s, reason)
			continue
		}
		if histogramQuery(q.Name) {
			le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64)
			if err != nil || math.IsNaN(le) || le < 0 {
				drop(s, ReasonBadLabels)
				continue
			}
			if hist == nil {
				hist = map[PodKey][]bucket{}
			}
			hist[key] = append(hist[key], bucket{le: le, count: v})
			continue
		}
		pm := res.Pods[key]
		switch q.Name {
		case QueryKvCacheUsage:
			pm.KvCacheUsage, pm.HasKvCacheUsage = v, true
		case QueryQueueLength:
			pm.QueueLength, pm.HasQueueLength = v, true
		case QueryCacheConfigInfo:
			blocks, size, reason := cacheConfig(s.Metric, v)
			if reason != "" {
				drop(s, reason)
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
			pm.AvgTTFTms = v * 1000 // vLLM and SGLang observe seconds
		case QueryAvgITL:
			pm.AvgITLms = v * 1000
		}
		res.Pods[key] = pm
	}
	setHistograms(res, q.Name, hist)
}

// histogramQuery says a query returns each pod's histogram buckets.
func histogramQuery(name string) bool {
	return name == QueryTPOTBuckets || name == QueryQueueBuckets || name == QueryTTFTBuckets
}

// bucket is one histogram bucket's rate.
type bucket struct{ le, count float64 }

// setHistograms assembles each pod's histogram of a bucket query (TPOT,
// queue time or TTFT) from its buckets' rates. A pod whose buckets lack +Inf or
// saw nothing keeps none; counts are made cumulative-monotone (rate() of
// counters scraped at slightly different times can dip by a fraction).
func setHistograms(res *Result, query string, byPod map[PodKey][]bucket) {
	for key, bs := range byPod {
		sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
		if !math.IsInf(bs[len(bs)-1].le, 1) || bs[len(bs)-1].count <= 0 {
			continue
		}
		h := decision.Histogram{Bounds: make([]float64, len(bs)), Counts: make([]float64, len(bs))}
		for i, b := range bs {
			h.Bounds[i], h.Counts[i] = b.le, b.count
			if i > 0 {
				h.Counts[i] = math.Max(h.Counts[i], h.Counts[i-1])
			}
		}
		pm := res.Pods[key]
		switch query {
		case QueryQueueBuckets:
			pm.QueueTime = h
		case QueryTTFTBuckets:
			pm.TTFT = h
		default:
			pm.TPOT = h
		}
		res.Pods[key] = pm
	}
}

// modelOf is an EPP series' model: the target model after rewrites, else
// the model name (vLLM's served model name).
func modelOf(m model.Metric) string {
	if t := m[LabelTargetModelName]; t != "" {
		return string(t)
	}
	return string(m[LabelModelName])
}

// cacheConfig reads the KV capacity labels of vllm:cache_config_info, or
// SGLang's pool size in tokens (the sample's value, marked LabelKVTokens) as
// blocks of one token, or says why it cannot.
func cacheConfig(m model.Metric, v float64) (blocks, size int64, reason string) {
	if m[LabelKVTokens] != "" {
		if v != math.Trunc(v) || v < 1 {
			return 0, 0, ReasonBadLabels
		}
		if v > decision.MaxGPUBlocks {
			return 0, 0, ReasonAboveMax
		}
		return int64(v), 1, ""
	}
	blocks, err1 := strconv.ParseInt(string(m["num_gpu_blocks"]), 10, 64)
	size, err2 := strconv.ParseInt(string(m["block_size"]), 10, 64)
	switch {
	case err1 != nil || err2 != nil || blocks <= 0 || size <= 0:
		return 0, 0, ReasonBadLabels
	case blocks > decision.MaxGPUBlocks || size > decision.MaxBlockSize:
		return 0, 0, ReasonAboveMax
	}
	return blocks, size, ""
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

// Reasons a sample is dropped: the reason label of
// wva_prometheus_dropped_samples_total.
const (
	ReasonNotFinite = "not_finite"
	ReasonNegative  = "negative"
	// ReasonAboveMax: above the query's physical bound (MaxValue).
	ReasonAboveMax = "above_max"
	// ReasonNoTarget: no pod label (per-pod queries) or no model label
	// (EPP queries).
	ReasonNoTarget = "no_target"
	// ReasonBadLabels: cache_config_info's num_gpu_blocks or block_size (or
	// SGLang's KV pool size in tokens) is not a positive integer, or a
	// histogram bucket's le is not a number.
	ReasonBadLabels = "bad_labels"
)

// Drop counts the samples of one query dropped for one reason.
type Drop struct {
	Query  string
	Reason string
}

// DroppedSample is one rejected sample, with the labels that place it.
type DroppedSample struct {
	Query, Reason         string
	Namespace, Pod, Model string
	Value                 float64
}

// MaxValue is the largest sample a query accepts, in the unit Prometheus
// returns: the physical bounds of decision (latencies in seconds), 1 for
// ratios. cache_config_info's value is unused (its labels carry the
// capacity): any finite value passes.
func MaxValue(query string) float64 {
	switch query {
	case QueryKvCacheUsage, QueryPrefixCacheHit:
		return 1
	case QueryQueueLength:
		return decision.MaxQueueLength
	case QueryAvgInputTokens, QueryAvgOutputTokens:
		return decision.MaxTokens
	case QueryArrivalRate, QueryGatewayArrivals, QueryTPOTBuckets, QueryQueueBuckets, QueryTTFTBuckets:
		return decision.MaxArrivalRate
	case QueryAvgTTFT, QueryAvgITL:
		return decision.MaxLatencyMs / 1000
	case QueryEPPQueueSize:
		return decision.MaxSchedulerQueue
	case QueryEPPQueueBytes:
		return decision.MaxSchedulerQueueBytes
	case QueryRequestCount:
		return decision.MaxRequestCount
	}
	return math.MaxFloat64
}

// Reject says why a query's sample is dropped ("" when it is kept): NaN,
// infinite, negative, or above MaxValue. A finite 1.7e308 in a token
// average or a rate would overflow inside the analyzers and turn the plan
// into NaN.
func Reject(query string, v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return ReasonNotFinite
	case v < 0:
		return ReasonNegative
	case v > MaxValue(query):
		return ReasonAboveMax
	}
	return ""
}

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
