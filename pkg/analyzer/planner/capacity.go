package planner

import (
	"math"
)

// Capacity model of one replica, in SLO terms. A vLLM replica decodes its
// running requests together, one token each per step; the step grows with
// the batch, so the inter-token latency grows with the concurrency k:
//
//	ITL(k) = A*k + B   (ms)
//
// fitted online per variant (weighted least squares with forgetting, pulled
// towards a prior so one operating point still gives a usable line). The
// largest concurrency a replica may carry is the smallest of the ITL
// target's (A*k + B <= itlHeadroom * target), the KV cache's (k requests
// of I + O/2 tokens in kvHeadroom of the cache) and --max-num-seqs; its
// rate at the SLO follows by Little's law:
//
//	rate = k* / (O * ITL(k*) + TTFT allowance)
const (
	// itlHeadroom keeps the mean ITL this far under the target: a
	// request's own mean ITL varies around it with the batch it meets.
	itlHeadroom = 0.7
	// kvHeadroom is the share of the KV cache the plan fills: above it
	// vLLM queues or preempts, and the TTFT tail grows.
	kvHeadroom = 0.75
	// ttftShare of the TTFT target is what a request spends before its
	// first token when no queue forms (prefill); it lengthens a request.
	ttftShare = 0.1
	// forget is the weight each cycle leaves on older observations
	// (about 20 cycles of memory).
	forget = 0.95
	// priorWeight is the weight of each of the prior's two points.
	priorWeight = 0.5
	// minSlope keeps the fitted line increasing (ms per request).
	minSlope = 1e-4
	// defaultMaxNumSeqs is vLLM's default --max-num-seqs.
	defaultMaxNumSeqs = 256
)

// Fit is the weighted least-squares state of ITL(k) = A*k + B.
type Fit struct {
	W   float64 `json:"w"`
	K   float64 `json:"k"`
	KK  float64 `json:"kk"`
	Y   float64 `json:"y"`
	KY  float64 `json:"ky"`
	Obs int     `json:"observations"`
}

// decay ages the observations by one cycle.
func (f *Fit) decay() {
	f.W *= forget
	f.K *= forget
	f.KK *= forget
	f.Y *= forget
	f.KY *= forget
}

// add records one operating point: concurrency k, mean ITL y (ms).
func (f *Fit) add(k, y, w float64) {
	f.W += w
	f.K += w * k
	f.KK += w * k * k
	f.Y += w * y
	f.KY += w * k * y
	f.Obs++
}

// Line is a fitted ITL(k) = A*k + B.
type Line struct {
	A float64 `json:"slopeMsPerRequest"`
	B float64 `json:"interceptMs"`
}

// At is ITL(k) in ms.
func (l Line) At(k float64) float64 { return l.A*k + l.B }

// solve fits the line through the observations and the prior's two points.
func (f Fit) solve(prior Line, priorK float64) Line {
	g := f
	g.add(0, prior.B, priorWeight)
	g.add(priorK, prior.At(priorK), priorWeight)
	det := g.W*g.KK - g.K*g.K
	if det <= 0 {
		return prior
	}
	a := (g.W*g.KY - g.K*g.Y) / det
	b := (g.Y - a*g.K) / g.W
	if !(a > minSlope) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		// A flat or falling line says the replicas never got busy enough
		// to show the slope: keep the prior's.
		a = max(prior.A, minSlope)
		b = (g.Y - a*g.K) / g.W
	}
	return Line{A: a, B: max(b, 0)}
}

// Limits bound a replica's concurrency.
type Limits struct {
	MaxNumSeqs float64 `json:"maxNumSeqs"`
	// KVConcurrency is how many requests of the current shape fit in
	// kvHeadroom of the KV cache; 0 when the cache size is unknown.
	KVConcurrency float64 `json:"kvConcurrency"`
}

// prior is the line assumed before a variant is observed: it reaches the
// headroom ITL at the engine's own concurrency limit, with a fifth of the
// target at zero load.
func prior(targetITL float64, lim Limits) (Line, float64) {
	k := lim.MaxNumSeqs
	if lim.KVConcurrency > 0 {
		k = math.Min(k, lim.KVConcurrency)
	}
	b := 0.2 * targetITL
	return Line{A: (itlHeadroom*targetITL - b) / k, B: b}, k
}

// ReplicaCapacity is one replica's rate at the SLO and what bounds it.
type ReplicaCapacity struct {
	Rate        float64 `json:"ratePerReplica"`
	Concurrency float64 `json:"concurrency"`
	ITLms       float64 `json:"itlMs"`
	Bound       string  `json:"bound"`
	// RequestSeconds is how long a request stays at that concurrency.
	RequestSeconds float64 `json:"requestSeconds"`
}

// capacityAt applies the limits to a fitted line.
func capacityAt(l Line, lim Limits, targetITL, targetTTFT, outTokens float64) ReplicaCapacity {
	k, bound := lim.MaxNumSeqs, "max-num-seqs"
	if lim.KVConcurrency > 0 && lim.KVConcurrency < k {
		k, bound = lim.KVConcurrency, "kv-cache"
	}
	if kITL := (itlHeadroom*targetITL - l.B) / l.A; kITL < k {
		k, bound = kITL, "itl"
	}
	if k < 1 {
		// Even one request misses the ITL target: plan one per replica.
		k, bound = 1, "itl-infeasible"
	}
	itl := l.At(k)
	secs := outTokens*itl/1000 + ttftShare*targetTTFT/1000
	return ReplicaCapacity{Rate: k / secs, Concurrency: k, ITLms: itl, Bound: bound, RequestSeconds: secs}
}
