package queueing

import (
	"errors"
	"fmt"
	"math"
)

// Params are the three hardware-specific service-time parameters the tuner
// learns per variant, all in milliseconds.
type Params struct {
	// Alpha is the fixed overhead of one engine iteration.
	Alpha float64 `json:"alpha"`
	// Beta is the compute time per token processed in an iteration.
	Beta float64 `json:"beta"`
	// Gamma is the KV-cache access time per token of context.
	Gamma float64 `json:"gamma"`
}

func (p Params) vec() [3]float64 { return [3]float64{p.Alpha, p.Beta, p.Gamma} }

func paramsOf(x [3]float64) Params { return Params{Alpha: x[0], Beta: x[1], Gamma: x[2]} }

// Valid reports whether every parameter is finite and > 0.
func (p Params) Valid() bool {
	for _, x := range p.vec() {
		if !(x > 0) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// Workload is the average request shape, in tokens.
type Workload struct {
	InputTokens  float64 `json:"avgInputTokens"`
	OutputTokens float64 `json:"avgOutputTokens"`
}

// Valid reports whether the shape can be modeled (I >= 0, O > 0).
func (w Workload) Valid() bool {
	return w.InputTokens >= 0 && w.OutputTokens > 0 && !math.IsInf(w.InputTokens, 0) && !math.IsInf(w.OutputTokens, 0)
}

// Server is the queue's shape: at most MaxBatch requests in service
// (--max-num-seqs) and MaxQueue waiting, K = MaxBatch + MaxQueue in all.
type Server struct {
	MaxBatch int `json:"maxBatch"`
	MaxQueue int `json:"maxQueue"`
}

// Formulas of upstream WVA's queueing model (docs/design.md#queueing-model),
// n requests in the batch, I input and O output tokens per request:
//
//	T(n)       = alpha + n*(beta*(I+O)/(O+1) + gamma*(I+O/2))
//	Prefill(n) = T(n) + (beta+gamma)*I
//	Decode(n)  = T(n) + beta + gamma*(I+O/2)
//	mu(n)      = n / (Prefill(n) + O*Decode(n))        (requests per ms)

// IterationTime is T(n) in ms.
func IterationTime(p Params, w Workload, n float64) float64 {
	i, o := w.InputTokens, w.OutputTokens
	return p.Alpha + n*(p.Beta*(i+o)/(o+1)+p.Gamma*(i+o/2))
}

// PrefillTime is Prefill(n) in ms: the iteration that runs a request's
// prompt and yields its first token.
func PrefillTime(p Params, w Workload, n float64) float64 {
	return IterationTime(p, w, n) + (p.Beta+p.Gamma)*w.InputTokens
}

// DecodeTime is Decode(n) in ms: one iteration that yields one more token.
func DecodeTime(p Params, w Workload, n float64) float64 {
	return IterationTime(p, w, n) + p.Beta + p.Gamma*(w.InputTokens+w.OutputTokens/2)
}

// ServiceRate is mu(n) in requests per ms with n requests in the batch.
func ServiceRate(p Params, w Workload, n float64) float64 {
	return n / (PrefillTime(p, w, n) + w.OutputTokens*DecodeTime(p, w, n))
}

// InferredTargets are upstream's SLO targets for k = sloMultiplier:
// TTFT = k*alpha + (beta+gamma)*I, ITL = k*alpha + beta + gamma*(I+(O+1)/2).
func InferredTargets(p Params, w Workload, k float64) (ttft, itl float64) {
	i, o := w.InputTokens, w.OutputTokens
	return k*p.Alpha + (p.Beta+p.Gamma)*i, k*p.Alpha + p.Beta + p.Gamma*(i+(o+1)/2)
}

// Model is the state-dependent M/M/1/K queue of one replica: a birth-death
// chain on the number of requests n = 0..K with birth rate lambda (n < K)
// and death rate mu(min(n, N)), N = MaxBatch, K = N + MaxQueue.
type Model struct {
	params   Params
	workload Workload
	server   Server
	// inv[n] = 1/mu(n), n = 1..filled (inv[0] unused); the rest is
	// computed when first needed (invAt).
	inv    []float64
	filled int
}

// NewModel validates the inputs and precomputes mu(n).
func NewModel(p Params, w Workload, s Server) (*Model, error) {
	m, err := newModel(p, w, s, nil)
	if err != nil {
		return nil, err
	}
	m.fill(s.MaxBatch)
	return &m, nil
}

// newModel is NewModel reusing buf for mu(n) when it is large enough, and
// computing mu(n) only as far as the solves reach: the tuner predicts one
// light-load operating point per model, where the chain is truncated a few
// dozen states into a batch of hundreds. It returns a value so that the
// tuner's models stay off the heap.
func newModel(p Params, w Workload, s Server, buf []float64) (Model, error) {
	switch {
	case !p.Valid():
		return Model{}, fmt.Errorf("parameters %+v: each must be a finite number > 0", p)
	case !w.Valid():
		return Model{}, fmt.Errorf("workload %+v: need input tokens >= 0 and output tokens > 0", w)
	case s.MaxBatch < 1 || s.MaxQueue < 0 || s.MaxBatch > MaxModeledBatch || s.MaxQueue > QueuePerBatchSlot*MaxModeledBatch:
		return Model{}, fmt.Errorf("server %+v: need 1 <= maxBatch <= %d and 0 <= maxQueue <= %d", s, MaxModeledBatch, QueuePerBatchSlot*MaxModeledBatch)
	}
	if cap(buf) < s.MaxBatch+1 {
		buf = make([]float64, s.MaxBatch+1)
	}
	return Model{params: p, workload: w, server: s, inv: buf[:s.MaxBatch+1]}, nil
}

// fill computes inv up to n: 1/ServiceRate with the terms that do not
// depend on n hoisted, operation for operation the same floats.
func (m *Model) fill(n int) {
	p, i, o := m.params, m.workload.InputTokens, m.workload.OutputTokens
	perSeq := p.Beta*(i+o)/(o+1) + p.Gamma*(i+o/2)
	prefill := (p.Beta + p.Gamma) * i
	decode := p.Gamma * (i + o/2)
	for ; m.filled < n; m.filled++ {
		k := float64(m.filled + 1)
		t := p.Alpha + k*perSeq
		m.inv[m.filled+1] = 1 / (k / ((t + prefill) + o*((t+p.Beta)+decode)))
	}
}

// invAt is 1/mu(n), n = 1..N, in ms.
func (m *Model) invAt(n int) float64 {
	if n > m.filled {
		m.fill(n)
	}
	return m.inv[n]
}

// MaxThroughput is mu(N), the saturation throughput, in requests per second.
func (m *Model) MaxThroughput() float64 { return 1000 / m.invAt(m.server.MaxBatch) }

// Prediction is the model's steady state at one arrival rate.
type Prediction struct {
	// ArrivalRate and Throughput in requests per second; Throughput =
	// lambda*(1 - p_K).
	ArrivalRate float64 `json:"arrivalRate"`
	Throughput  float64 `json:"throughput"`
	// Blocking is p_K, the share of arrivals that find the queue full.
	Blocking float64 `json:"blocking"`
	// InSystem, InQueue and InService are the mean numbers of requests
	// (InService is the mean batch occupancy).
	InSystem  float64 `json:"inSystem"`
	InQueue   float64 `json:"inQueue"`
	InService float64 `json:"inService"`
	// WaitMs is the mean queueing time of admitted requests (Little).
	WaitMs float64 `json:"waitMs"`
	// AdmissionMs is the mean wait for the engine iteration in progress to
	// end before a request can join the batch (see Predict).
	AdmissionMs float64 `json:"admissionMs"`
	// TTFTms = WaitMs + AdmissionMs + Prefill(InService);
	// ITLms = Decode(InService).
	TTFTms float64 `json:"ttftMs"`
	ITLms  float64 `json:"itlMs"`
}

// Predict solves the chain at lambda requests per second.
//
// TTFT adds one term to upstream's Wq + Prefill(n): a continuous-batching
// engine admits new requests only between iterations, so an arrival that
// finds the server busy (probability 1 - p(0)) first waits for the residual
// of the iteration in progress. Iterations last Decode(n) on average, but
// each prefill in an iteration adds P = (beta+gamma)*I to it; with Poisson
// arrivals the number of prefills per iteration is Poisson with mean
// lambda*Decode(n), so E[D^2]/E[D] = Decode(n) + lambda*P^2 and
//
//	Admission = (1 - p(0)) * (Decode(n) + lambda*P^2) / 2.
//
// Without it TTFT is underestimated by about half an iteration (the
// discrete-event validation in model_test.go measures both).
func (m *Model) Predict(lambdaPerSec float64) Prediction {
	lam := math.Max(0, lambdaPerSec) / 1000 // per ms
	pr := Prediction{ArrivalRate: math.Max(0, lambdaPerSec)}
	decode := DecodeTime(m.params, m.workload, 0)
	if lam > 0 {
		st := m.solve(lam)
		pr.Blocking = st.pK
		pr.InSystem, pr.InQueue, pr.InService = st.l, st.lq, st.ns
		x := lam * (1 - st.pK)
		pr.Throughput = x * 1000
		if x > 0 {
			pr.WaitMs = st.lq / x
		}
		decode = DecodeTime(m.params, m.workload, pr.InService)
		prefillWork := (m.params.Beta + m.params.Gamma) * m.workload.InputTokens
		pr.AdmissionMs = (1 - st.p0) * (decode + lam*prefillWork*prefillWork) / 2
	}
	pr.TTFTms = pr.WaitMs + pr.AdmissionMs + PrefillTime(m.params, m.workload, pr.InService)
	pr.ITLms = decode
	return pr
}

type chainStats struct{ p0, pK, l, lq, ns float64 }

// solve computes the stationary distribution of the birth-death chain,
// p(n) = p(n-1) * lambda / mu(min(n, N)), in O(N): the tail n > N has the
// constant ratio r = lambda/mu(N), so its sums have closed forms. Values are
// rescaled as they grow, so any lambda stays finite.
func (m *Model) solve(lam float64) chainStats {
	n := m.server.MaxBatch
	// Head n = 0..N: z = sum q(n), l = sum n*q(n).
	q, z, l, q0 := 1.0, 1.0, 0.0, 1.0
	states := float64(n + m.server.MaxQueue)
	for i := 1; i <= n; i++ {
		ratio := lam * m.invAt(i)
		q *= ratio
		z += q
		l += float64(i) * q
		// mu(n) grows with n, so the ratios shrink: once below 1, the rest
		// of the chain (head and tail) sums to at most q*ratio/(1-ratio)
		// per state; stop when even K such states cannot matter.
		if ratio < 1 && q*ratio*states < 1e-15*z*(1-ratio) {
			return chainStats{p0: q0 / z, l: l / z, ns: l / z}
		}
		if q > 1e150 {
			q, z, l, q0 = q*1e-150, z*1e-150, l*1e-150, q0*1e-150
		}
	}
	qN := q
	Q := m.server.MaxQueue
	if Q == 0 {
		return chainStats{p0: q0 / z, pK: qN / z, l: l / z, ns: l / z}
	}
	r := lam * m.invAt(n)
	// Tail sums relative to q(N): s1 = sum_{j=1..Q} r^j, s2 = sum j*r^j,
	// rq = r^Q; with r > 1 they are taken relative to q(K) = q(N)*r^Q,
	// which may exceed any float, so the head is scaled down instead.
	var s1, s2, rq float64
	fq := float64(Q)
	switch {
	case math.Abs(r-1) < 1e-4:
		// Near r = 1 the closed forms cancel badly: sum directly.
		x := 1.0
		for j := 1; j <= Q; j++ {
			x *= r
			s1 += x
			s2 += float64(j) * x
		}
		rq = x
	case r < 1:
		rq = math.Pow(r, fq)
		s1 = r * (1 - rq) / (1 - r)
		s2 = r * (1 - (fq+1)*rq + fq*rq*r) / ((1 - r) * (1 - r))
	default:
		// Reverse: sum_{j=1..Q} r^j = r^Q * a0 and sum j*r^j = r^Q*(Q*a0 - a1)
		// with s = 1/r, a0 = sum_{i<Q} s^i, a1 = sum_{i<Q} i*s^i.
		s := 1 / r
		sq := math.Pow(s, fq)
		a0 := (1 - sq) / (1 - s)
		a1 := s * (1 - fq*sq/s + (fq-1)*sq) / ((1 - s) * (1 - s))
		logK := math.Log(qN) + fq*math.Log(r) // log q(K)
		shift := math.Max(0, logK)            // scale so that q(K) <= 1
		scale := math.Exp(-shift)
		qK := math.Exp(logK - shift)
		z, l, qN = z*scale, l*scale, qN*scale
		tailZ := qK * a0
		tailLq := qK * (fq*a0 - a1)
		total := z + tailZ
		return chainStats{
			p0: q0 * scale / total,
			pK: qK / total,
			l:  (l + float64(n)*tailZ + tailLq) / total,
			lq: tailLq / total,
			ns: (l + float64(n)*tailZ) / total,
		}
	}
	tailZ := qN * s1
	tailLq := qN * s2
	total := z + tailZ
	return chainStats{
		p0: q0 / total,
		pK: qN * rq / total,
		l:  (l + float64(n)*tailZ + tailLq) / total,
		lq: tailLq / total,
		ns: (l + float64(n)*tailZ) / total,
	}
}

// Bound names what limits the maximum rate.
const (
	BoundTTFT       = "ttft"
	BoundITL        = "itl"
	BoundSaturation = "saturation"
	BoundInfeasible = "infeasible"
)

// ErrInfeasible is returned when a target is missed even at zero load: no
// number of replicas meets it.
var ErrInfeasible = errors.New("target missed even without load")

// Capacity is the largest arrival rate per replica that meets the targets.
type Capacity struct {
	// MaxRate in requests per second per replica.
	MaxRate float64 `json:"maxRatePerReplica"`
	// Bound is the target that limits it (ttft, itl) or saturation when
	// both hold up to the saturation throughput.
	Bound string `json:"bound"`
	// Saturation is mu(N), the most one replica can serve (req/s).
	Saturation float64 `json:"saturationRate"`
	// AtMaxRate is the prediction at MaxRate; Idle at zero load.
	AtMaxRate Prediction `json:"atMaxRate"`
	Idle      Prediction `json:"idle"`
}

// searchSteps bounds the binary search: the bracket shrinks by 2^-24
// (6e-8 of the saturation rate, far below any rate that matters) for 24
// chain solves of O(N).
const searchSteps = 24

// MaxRate binary-searches the largest lambda (requests per second) with
// TTFT(lambda) <= targetTTFT and ITL(lambda) <= targetITL (a target <= 0 is
// not checked), below the saturation throughput mu(N). Both latencies grow
// with lambda, so the feasible set is an interval from 0.
func (m *Model) MaxRate(targetTTFT, targetITL float64) (Capacity, error) {
	meets := func(p Prediction) bool {
		return (targetTTFT <= 0 || p.TTFTms <= targetTTFT) && (targetITL <= 0 || p.ITLms <= targetITL)
	}
	c := Capacity{Idle: m.Predict(0), Saturation: m.MaxThroughput()}
	if !meets(c.Idle) {
		c.Bound = BoundInfeasible
		return c, fmt.Errorf("%w: idle TTFT %.1f ms (target %.1f), idle ITL %.2f ms (target %.2f)",
			ErrInfeasible, c.Idle.TTFTms, targetTTFT, c.Idle.ITLms, targetITL)
	}
	hi := m.MaxThroughput() * (1 - 1e-9)
	atHi := m.Predict(hi)
	if meets(atHi) {
		c.MaxRate, c.Bound, c.AtMaxRate = hi, BoundSaturation, atHi
		return c, nil
	}
	lo, best := 0.0, c.Idle
	for range searchSteps {
		mid := (lo + hi) / 2
		if p := m.Predict(mid); meets(p) {
			lo, best = mid, p
		} else {
			hi, atHi = mid, p
		}
	}
	c.MaxRate, c.AtMaxRate = lo, best
	c.Bound = BoundITL
	if targetTTFT > 0 && atHi.TTFTms > targetTTFT {
		c.Bound = BoundTTFT
	}
	return c, nil
}
