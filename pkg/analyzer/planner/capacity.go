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
// non-negative (a load never makes steps shorter).
func (f Fit) solve(prior Curve) Curve {
	theta := [3]float64{prior.P, prior.C1, prior.C2}
	m, v := f.M, f.V
	for i := range 3 {
		m[i][i] += priorWeight
		v[i] += priorWeight * theta[i]
	}
	x, ok := solve3(m, v)
	if !ok {
		return prior
	}
	c := Curve{P: x[0], C1: x[1], C2: x[2]}
	if c.C1 < 0 || c.C2 < 0 {
		// Keep the non-negative slopes (the prior's where the fit's is
		// negative) and refit the intercept alone.
		if c.C1 < 0 {
			c.C1 = prior.C1
		}
		if c.C2 < 0 {
			c.C2 = prior.C2
		}
		// P = (V0 + C1*sum(w*u1) + C2*sum(w*u2) + w0*P0) / (W + w0),
		// where M[0][1] = -sum(w*u1) and M[0][2] = -sum(w*u2).
		c.P = (f.V[0] - c.C1*f.M[0][1] - c.C2*f.M[0][2] + priorWeight*prior.P) / (f.M[0][0] + priorWeight)
	}
	if c.slope(1, 1) <= 0 || math.IsNaN(c.P) || math.IsInf(c.P, 0) {
		return prior
	}
	return c
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
func capacityAt(c Curve, lim Limits, headroom, targetITL, targetTTFT, in, out float64) ReplicaCapacity {
	rate, bound := headroom*c.Rate(targetITL, in, out), "itl"
	// A request lasts as long as the ITL the plan allows (itlHeadroom of
	// the target), not what the fit says at that rate: a line fitted
	// from few points would swing the concurrency bounds and the margin.
	itl := itlHeadroom * targetITL
	secs := out*itl/1000 + ttftShare*targetTTFT/1000
	if k := lim.MaxNumSeqs; k/secs < rate {
		rate, bound = k/secs, "max-num-seqs"
	}
	if k := lim.KVConcurrency; k > 0 && k/secs < rate {
		rate, bound = k/secs, "kv-cache"
	}
	if rate <= 0 {
		// Even an idle replica misses the ITL target: plan one request
		// at a time per replica.
		itl = c.ITLms(0, in, out)
		secs = out*itl/1000 + ttftShare*targetTTFT/1000
		rate, bound = 1/secs, "itl-infeasible"
	}
	if bound != "itl" {
		if l := c.ITLms(rate, in, out); l < itl {
			itl = l
			secs = out*itl/1000 + ttftShare*targetTTFT/1000
		}
	}
	return ReplicaCapacity{Rate: rate, Concurrency: rate * secs, ITLms: itl, Bound: bound, RequestSeconds: secs}
}
