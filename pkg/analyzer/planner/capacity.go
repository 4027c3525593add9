package planner

import (
	"math"
)

// Capacity model of one replica, in SLO terms. A vLLM replica runs one
// step at a time over its whole batch: decode tokens of the running
// requests and chunks of the prompts just admitted. The step grows with the
// tokens it carries, and those grow with the load, so a replica's
// inter-token latency at a token throughput of x tokens per second is
//
//	ITL(x) = 1 / (P - Q*x)
//
// (step time T = alpha + c*x*T solved for T, with c the marginal cost of a
// token): 1/ITL is linear in the throughput. P and Q are fitted online per
// variant (weighted least squares with forgetting, pulled towards a prior
// so one operating point still gives a usable curve); a saturated replica's
// completions still lie on the curve, so overload teaches it too. The rate
// a replica sustains at the SLO is the throughput where ITL reaches
// itlHeadroom of the target, divided by the tokens of a request, within
// the KV cache's and --max-num-seqs' bounds on the requests in flight.
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
	// priorWeight is the weight of each of the prior's two points before
	// any observation.
	priorWeight = 0.5
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

// Curve is a fitted 1/ITL(x) = P - Q*x, x in tokens per second per
// replica, 1/ITL in tokens per second per request.
type Curve struct {
	P float64 `json:"p"`
	Q float64 `json:"q"`
}

// ITLms is the inter-token latency at throughput x, +Inf past saturation.
func (c Curve) ITLms(x float64) float64 {
	if d := c.P - c.Q*x; d > 0 {
		return 1000 / d
	}
	return math.Inf(1)
}

// Throughput is the x where ITL reaches itlMs.
func (c Curve) Throughput(itlMs float64) float64 { return (c.P - 1000/itlMs) / c.Q }

// solve fits the curve through the observations and the prior's two points.
func (f Fit) solve(prior Curve, priorX float64) Curve {
	w := priorWeight
	g := f
	g.add(0, prior.P, w)
	g.add(priorX, prior.P-prior.Q*priorX, w)
	det := g.W*g.KK - g.K*g.K
	if det <= 0 {
		return prior
	}
	slope := (g.W*g.KY - g.K*g.Y) / det
	q := -slope
	if !(q > prior.Q*1e-3) || math.IsInf(q, 0) || math.IsNaN(q) {
		// A flat or rising line says the replicas never got busy enough
		// to show the slope: keep the prior's.
		q = prior.Q
	}
	p := (g.Y + q*g.K) / g.W
	if math.IsNaN(p) || math.IsInf(p, 0) {
		return prior
	}
	return Curve{P: p, Q: q}
}

// Limits bound a replica's concurrency.
type Limits struct {
	MaxNumSeqs float64 `json:"maxNumSeqs"`
	// KVConcurrency is how many requests of the current shape fit in
	// kvHeadroom of the KV cache; 0 when the cache size is unknown.
	KVConcurrency float64 `json:"kvConcurrency"`
}

// prior is the curve assumed before a variant is observed: a fifth of the
// ITL target at zero load, and the headroom ITL where the engine's own
// concurrency limit is reached (requests of in+out tokens, each holding a
// slot for out tokens at that ITL). It returns the curve and that
// throughput.
func prior(targetITL, in, out float64, lim Limits) (Curve, float64) {
	k := lim.MaxNumSeqs
	if lim.KVConcurrency > 0 {
		k = math.Min(k, lim.KVConcurrency)
	}
	itl := itlHeadroom * targetITL
	x := k / (out * itl / 1000) * (in + out)
	p := 1000 / (0.2 * targetITL)
	return Curve{P: p, Q: (p - 1000/itl) / x}, x
}

// ReplicaCapacity is one replica's rate at the SLO and what bounds it.
type ReplicaCapacity struct {
	Rate        float64 `json:"ratePerReplica"`
	Concurrency float64 `json:"concurrency"`
	ITLms       float64 `json:"itlMs"`
	Bound       string  `json:"bound"`
	// RequestSeconds is how long a request stays at that rate.
	RequestSeconds float64 `json:"requestSeconds"`
}

// capacityAt applies the limits to a fitted curve.
func capacityAt(c Curve, lim Limits, targetITL, targetTTFT, in, out float64) ReplicaCapacity {
	itl := itlHeadroom * targetITL
	secs := out*itl/1000 + ttftShare*targetTTFT/1000
	rate, bound := c.Throughput(itl)/(in+out), "itl"
	if k := lim.MaxNumSeqs; k/secs < rate {
		rate, bound = k/secs, "max-num-seqs"
	}
	if k := lim.KVConcurrency; k > 0 && k/secs < rate {
		rate, bound = k/secs, "kv-cache"
	}
	if rate <= 0 {
		// Even an idle replica misses the ITL target: plan one request
		// at a time per replica.
		itl = c.ITLms(0)
		secs = out*itl/1000 + ttftShare*targetTTFT/1000
		rate, bound = 1/secs, "itl-infeasible"
	}
	if bound != "itl" {
		if x := rate * (in + out); x < c.Throughput(itl) {
			itl = c.ITLms(x)
			secs = out*itl/1000 + ttftShare*targetTTFT/1000
		}
	}
	return ReplicaCapacity{Rate: rate, Concurrency: rate * secs, ITLms: itl, Bound: bound, RequestSeconds: secs}
}
