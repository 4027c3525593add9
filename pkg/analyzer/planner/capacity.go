package planner

import (
	"math"
)

// Capacity model of one replica, in SLO terms. A vLLM replica runs one
// step at a time over its batch: decode tokens of the running requests,
// chunks of the prompts just admitted, and attention over the KV cache the
// running requests hold. With r requests per second of I prompt and O
// output tokens, a step of length T carries r*(I+O)*T tokens and r*O*T
// running requests holding about I+O/2 tokens each, so
//
//	T = alpha + beta*r*(I+O)*T + gamma*r*O*(I+O/2)*T
//	1/T = P - C1*x1 - C2*x2,  x1 = r*(I+O), x2 = r*O*(I+O/2)
//
// 1/ITL is linear in the two loads. P, C1 and C2 are fitted online per
// variant (ridge regression with forgetting, pulled towards a prior so one
// operating point still gives a usable plane); a saturated replica's
// completions still lie on the plane, so overload teaches it too. The rate
// a replica is planned at is a headroom (learned, attainment.go) of the r
// where ITL reaches the target, within the KV cache's and --max-num-seqs'
// bounds on the requests in flight.
const (
	// itlHeadroom is the share of the ITL target a request's duration
	// is planned with, and the prior's curve reaches at the engine's
	// concurrency limit.
	itlHeadroom = 0.9
	// startHeadroom is the share of the rate at the ITL target a replica
	// is planned at until its variant's requests say otherwise
	// (attainment.go).
	startHeadroom = 0.9
	// kvHeadroom is the share of the KV cache the plan fills: above it
	// vLLM queues or preempts, and the TTFT tail grows.
	kvHeadroom = 0.75
	// ttftShare of the TTFT target is what a request spends before its
	// first token when no queue forms (prefill); it lengthens a request.
	ttftShare = 0.1
	// forget is the weight each cycle leaves on older observations
	// (about 20 cycles of memory).
	forget = 0.95
	// priorWeight is the ridge weight pulling the fit to the prior.
	priorWeight = 0.5
	// defaultMaxNumSeqs is vLLM's default --max-num-seqs.
	defaultMaxNumSeqs = 256
	// scale1 and scale2 bring x1 (tokens/s) and x2 (token-seconds held
	// per second) to order one, so the ridge weighs the terms alike.
	scale1 = 1e4
	scale2 = 1e6
)

// Fit holds the weighted normal equations of y = P - C1*u1 - C2*u2 with
// u = x / scale: M = sum w*f*f', V = sum w*f*y for f = (1, -u1, -u2).
type Fit struct {
	M   [3][3]float64 `json:"m"`
	V   [3]float64    `json:"v"`
	W   float64       `json:"w"`
	Obs int           `json:"observations"`
}

// decay ages the observations by one cycle.
func (f *Fit) decay() {
	for i := range 3 {
		for j := range 3 {
			f.M[i][j] *= forget
		}
		f.V[i] *= forget
	}
	f.W *= forget
}

// add records one operating point: loads x1, x2 and 1/ITL y (per second).
func (f *Fit) add(x1, x2, y, w float64) {
	v := [3]float64{1, -x1 / scale1, -x2 / scale2}
	for i := range 3 {
		for j := range 3 {
			f.M[i][j] += w * v[i] * v[j]
		}
		f.V[i] += w * v[i] * y
	}
	f.W += w
	f.Obs++
}

// Curve is a fitted 1/ITL = P - C1*x1/scale1 - C2*x2/scale2 (per second).
type Curve struct {
	P  float64 `json:"p"`
	C1 float64 `json:"c1"`
	C2 float64 `json:"c2"`
}

// slope is d(1/ITL)/dr for requests of in and out tokens.
func (c Curve) slope(in, out float64) float64 {
	return c.C1*(in+out)/scale1 + c.C2*out*(in+out/2)/scale2
}

// ITLms is the inter-token latency at r requests per second, +Inf past
// saturation.
func (c Curve) ITLms(r, in, out float64) float64 {
	if d := c.P - r*c.slope(in, out); d > 0 {
		return 1000 / d
	}
	return math.Inf(1)
}

// Rate is the r where ITL reaches itlMs.
func (c Curve) Rate(itlMs, in, out float64) float64 {
	return (c.P - 1000/itlMs) / c.slope(in, out)
}

// solve fits the curve: ridge regression towards the prior, slopes kept
// non-negative (a load never makes steps shorter). A slope the data would
// make negative is fixed at zero and the other refitted without it (an
// active set): the load it stands for does not lengthen this variant's
// steps, and keeping the prior's slope instead bends the intercept and
// the other slope around a cost the replicas do not show (a reasoning
// model's replicas at 35 ms ITL read as near their limit at a third of
// the load they serve within the target).
func (f Fit) solve(prior Curve) Curve {
	theta := [3]float64{prior.P, prior.C1, prior.C2}
	var fixed [3]bool
	for range 3 {
		m, v := f.M, f.V
		for i := range 3 {
			m[i][i] += priorWeight
			v[i] += priorWeight * theta[i]
		}
		for i := range 3 {
			if fixed[i] {
				// x_i = 0: its column leaves the other equations,
				// its row becomes x_i = 0.
				for j := range 3 {
					m[j][i], m[i][j] = 0, 0
				}
				m[i][i], v[i] = 1, 0
			}
		}
		x, ok := solve3(m, v)
		if !ok {
			return prior
		}
		negative := false
		for i := 1; i < 3; i++ {
			if x[i] < 0 {
				fixed[i], negative = true, true
			}
		}
		if negative {
			continue
		}
		c := Curve{P: x[0], C1: x[1], C2: x[2]}
		if c.slope(1, 1) <= 0 || math.IsNaN(c.P) || math.IsInf(c.P, 0) {
			return prior
		}
		return c
	}
	return prior
}

// solve3 solves a 3x3 linear system by Gaussian elimination with partial
// pivoting.
func solve3(m [3][3]float64, v [3]float64) ([3]float64, bool) {
	for col := range 3 {
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if math.Abs(m[p][col]) < 1e-12 {
			return [3]float64{}, false
		}
		m[col], m[p] = m[p], m[col]
		v[col], v[p] = v[p], v[col]
		for r := col + 1; r < 3; r++ {
			k := m[r][col] / m[col][col]
			for c := col; c < 3; c++ {
				m[r][c] -= k * m[col][c]
			}
			v[r] -= k * v[col]
		}
	}
	var x [3]float64
	for r := 2; r >= 0; r-- {
		sum := v[r]
		for c := r + 1; c < 3; c++ {
			sum -= m[r][c] * x[c]
		}
		x[r] = sum / m[r][r]
	}
	return x, true
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
// concurrency limit is reached (each request holding a slot for out tokens
// at that ITL), the two loads sharing the slope equally.
func prior(targetITL, in, out float64, lim Limits) Curve {
	k := lim.MaxNumSeqs
	if lim.KVConcurrency > 0 {
		k = math.Min(k, lim.KVConcurrency)
	}
	itl := itlHeadroom * targetITL
	r := k / (out * itl / 1000)
	p := 1000 / (0.2 * targetITL)
	drop := p - 1000/itl
	return Curve{P: p, C1: drop / 2 / (r * (in + out) / scale1), C2: drop / 2 / (r * out * (in + out/2) / scale2)}
}

// promptPrior is the curve a replica's prompts alone give, through the
// intercept p the observations fitted: with chunked prefill a step carries
// the prompt tokens admitted beside the decodes, and prompts computed at
// promptRate tokens per second take r*in/promptRate of the engine's time,
// so a step that lasts 1/p at idle lasts 1/(p*(1 - r*in/promptRate)).
// The engine-limit prior (prior) puts the ITL target's headroom where the
// KV cache is full, which for answers as long as their prompts is nearly
// four times the ITL there: an H100 holding 63 requests of 3,400 prompt and
// 3,300 output tokens runs 24 ms (wva simulate replica), where a line
// fitted near idle under that prior said 33.6 ms, and credited it 0.565
// req/s where it serves 0.78.
func promptPrior(p, in, out, promptRate float64) Curve {
	return Curve{P: p, C1: p * in / promptRate / ((in + out) / scale1)}
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

// capacityAt applies the limits to a fitted curve: a replica is planned at
// headroom of the rate where its mean ITL reaches the target. The margin
// is on the rate, not on the ITL: 1/ITL falls linearly with the load, so
// ITL climbs as 1/(1-utilization) near the target, and 10% under the
// target ITL is only a few percent of load (a burst of that size puts the
// replica over the target).
//
// The KV cache and --max-num-seqs bound the requests in flight, and a
// request stays as long as its tokens take at the ITL of the rate planned:
// the bound's rate is where rate x request time reaches it. That ITL is
// the shorter of the curve's and timing's (the same observations fitted
// under the prompts' prior, promptPrior), at most itlHeadroom of the
// target (a line fitted from few points must not stretch a request past
// what the plan allows): a reasoning model's 3,000-token answers decoding
// at 35 ms hold a slot for 105 s, not the 270 s the target would allow.
func capacityAt(c, timing Curve, lim Limits, headroom, targetITL, targetTTFT, in, out float64) ReplicaCapacity {
	rate := headroom * c.Rate(targetITL, in, out)
	maxITL := itlHeadroom * targetITL
	itl := func(r float64) float64 {
		return min(c.ITLms(r, in, out), timing.ITLms(r, in, out), maxITL)
	}
	seconds := func(r float64) float64 {
		return out*itl(r)/1000 + ttftShare*targetTTFT/1000
	}
	k, kBound := lim.MaxNumSeqs, "max-num-seqs"
	if lim.KVConcurrency > 0 && lim.KVConcurrency < k {
		k, kBound = lim.KVConcurrency, "kv-cache"
	}
	if rate <= 0 {
		// Even an idle replica misses the ITL target: plan one request
		// at a time per replica.
		itl := c.ITLms(0, in, out)
		secs := out*itl/1000 + ttftShare*targetTTFT/1000
		return ReplicaCapacity{Rate: 1 / secs, Concurrency: 1, ITLms: itl, Bound: "itl-infeasible", RequestSeconds: secs}
	}
	if rate*seconds(rate) <= k {
		// Within the ITL's rate a request is timed at the ITL the plan
		// allows: the margin on arrivals over a request's time
		// (staffed) stays what the plan can take.
		secs := out*maxITL/1000 + ttftShare*targetTTFT/1000
		return ReplicaCapacity{Rate: rate, Concurrency: rate * secs, ITLms: maxITL, Bound: "itl", RequestSeconds: secs}
	}
	// rate x seconds(rate) grows with the rate: bisect for where it
	// reaches k.
	lo, hi := 0.0, rate
	for range 60 {
		mid := (lo + hi) / 2
		if mid*seconds(mid) > k {
			hi = mid
		} else {
			lo = mid
		}
	}
	secs := seconds(lo)
	return ReplicaCapacity{Rate: lo, Concurrency: lo * secs, ITLms: itl(lo), Bound: kBound, RequestSeconds: secs}
}
