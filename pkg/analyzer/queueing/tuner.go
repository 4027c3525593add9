package queueing

import (
	"fmt"
	"math"

	"github.com/wva-project/wva/pkg/decision"
)

// Tuner learns Params online with an extended Kalman filter: the state is
// x = [alpha, beta, gamma] (ms), the observation z = [TTFT, ITL] (ms) of one
// replica at its observed arrival rate and token averages, and the
// observation function h(x) is the queueing model's prediction. Guards
// against divergence (docs/design.md#tuner-guards): an update whose normalized
// innovation squared is >= MaxNIS (7.378, the 97.5% point of chi-square
// with 2 degrees of freedom) is rejected; each step and the state itself
// are bounded; after ResetAfter consecutive rejections the covariance is
// reset so the filter can follow a real change (new hardware, new engine
// version) instead of rejecting it forever.
type Tuner struct {
	// MeasurementNoise is the relative standard deviation of an observed
	// TTFT or ITL (model error included).
	MeasurementNoise float64
	// ProcessNoise is the relative standard deviation of the random walk of
	// the parameters per update.
	ProcessNoise float64
	// InitialUncertainty is the relative standard deviation of the state
	// when the filter starts or is reset.
	InitialUncertainty float64
	// MaxStep bounds the relative change of each parameter in one update.
	MaxStep float64
	// MaxNIS rejects an update whose NIS is at or above it.
	MaxNIS float64
	// ResetAfter consecutive rejections reset the covariance.
	ResetAfter int
	// Min and Max bound the state.
	Min, Max Params
	// Server is the queue shape assumed when an observation has none.
	Server Server
}

// DefaultTuner is the configuration the SLO analyzer uses.
func DefaultTuner() Tuner {
	return Tuner{
		MeasurementNoise:   0.10,
		ProcessNoise:       0.02,
		InitialUncertainty: 1.0,
		MaxStep:            0.5,
		MaxNIS:             7.378,
		ResetAfter:         5,
		Min:                Params{Alpha: 1e-3, Beta: 1e-7, Gamma: 1e-9},
		Max:                Params{Alpha: 1e4, Beta: 1e2, Gamma: 1e1},
		Server:             Server{MaxBatch: DefaultMaxBatch, MaxQueue: QueuePerBatchSlot * DefaultMaxBatch},
	}
}

// TunerState is the filter's memory for one variant.
type TunerState struct {
	Params Params `json:"params"`
	// Covariance of the estimate, rows and columns alpha, beta, gamma (ms^2).
	Covariance [3][3]float64 `json:"covariance"`
	// Updates counts accepted updates; Rejections the consecutive rejected
	// ones; Resets the covariance resets.
	Updates    int `json:"updates"`
	Rejections int `json:"rejections"`
	Resets     int `json:"resets"`
	// NIS of the last update attempt.
	NIS float64 `json:"nis"`
}

// StdDev returns the standard deviation of each parameter.
func (s TunerState) StdDev() Params {
	return Params{Alpha: math.Sqrt(s.Covariance[0][0]), Beta: math.Sqrt(s.Covariance[1][1]), Gamma: math.Sqrt(s.Covariance[2][2])}
}

// Observation is one replica's measured operating point.
type Observation struct {
	Pod string `json:"pod,omitempty"`
	// ArrivalRate in requests per second.
	ArrivalRate float64  `json:"arrivalRate"`
	Workload    Workload `json:"workload"`
	TTFTms      float64  `json:"ttftMs"`
	ITLms       float64  `json:"itlMs"`
}

// Valid reports whether the observation carries everything the filter needs.
func (o Observation) Valid() bool {
	ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	return ok(o.ArrivalRate) && ok(o.TTFTms) && ok(o.ITLms) && o.Workload.Valid()
}

// Step is what one update did.
type Step struct {
	Pod       string     `json:"pod,omitempty"`
	Accepted  bool       `json:"accepted"`
	Reset     bool       `json:"reset,omitempty"`
	NIS       float64    `json:"nis"`
	Predicted [2]float64 `json:"predicted"`
	Observed  [2]float64 `json:"observed"`
	Note      string     `json:"note,omitempty"`
}

// Seed makes a first estimate from one observation, so the filter can start
// without a profile. With n = lambda*(TTFT + O*ITL) requests in service
// (Little) it splits ITL = alpha + (n+1)*c evenly between alpha and the
// per-request cost c, takes beta from the prompt part of TTFT and gamma
// from what is left of c. It is rough on purpose: the filter starts with a
// 100% uncertainty and corrects it.
func (t Tuner) Seed(o Observation) TunerState {
	i, out := o.Workload.InputTokens, o.Workload.OutputTokens
	n := o.ArrivalRate / 1000 * (o.TTFTms + out*o.ITLms)
	alpha := o.ITLms / 2
	c := (o.ITLms - alpha) / (n + 1)
	beta := t.Min.Beta
	if i > 0 {
		beta = math.Max(t.Min.Beta, (o.TTFTms-alpha-n*c)/i)
	}
	gamma := math.Max(t.Min.Gamma, (c-beta*(i+out)/(out+1))/(i+out/2))
	if gamma == t.Min.Gamma {
		// c is all compute: split it instead.
		beta = math.Max(t.Min.Beta, c/2/((i+out)/(out+1)))
		gamma = math.Max(t.Min.Gamma, c/2/(i+out/2))
	}
	return t.Start(t.clamp(Params{Alpha: alpha, Beta: beta, Gamma: gamma}))
}

// Start returns a filter state at p with the initial uncertainty.
func (t Tuner) Start(p Params) TunerState {
	s := TunerState{Params: p}
	s.Covariance = t.initialCovariance(p)
	return s
}

func (t Tuner) initialCovariance(p Params) [3][3]float64 {
	var c [3][3]float64
	for i, x := range p.vec() {
		c[i][i] = sq(t.InitialUncertainty * x)
	}
	return c
}

func (t Tuner) clamp(p Params) Params {
	x, lo, hi := p.vec(), t.Min.vec(), t.Max.vec()
	for i := range x {
		x[i] = math.Min(hi[i], math.Max(lo[i], x[i]))
	}
	return paramsOf(x)
}

// predict returns h(x) = [TTFT, ITL] at the observation's operating point;
// buf is scratch space for the model.
func (t Tuner) predict(x [3]float64, o Observation, srv Server, buf []float64) ([2]float64, bool) {
	m, err := newModel(paramsOf(x), o.Workload, srv, buf)
	if err != nil {
		return [2]float64{}, false
	}
	p := m.Predict(o.ArrivalRate)
	z := [2]float64{p.TTFTms, p.ITLms}
	return z, decision.Finite(z[0]) && decision.Finite(z[1])
}

// Update runs one predict/update cycle of the filter. It never modifies s.
func (t Tuner) Update(s TunerState, o Observation, srv Server) (TunerState, Step) {
	return t.update(s, o, srv, nil)
}

// update is Update with buf as the models' scratch space, so that a
// variant's updates share one.
func (t Tuner) update(s TunerState, o Observation, srv Server, buf []float64) (TunerState, Step) {
	step := Step{Pod: o.Pod, Observed: [2]float64{o.TTFTms, o.ITLms}}
	if !o.Valid() {
		step.Note = "observation incomplete"
		return s, step
	}
	if srv.MaxBatch < 1 {
		srv = t.Server
	}
	x := s.Params.vec()
	p := t.predictCovariance(s.Covariance, x)
	if cap(buf) < srv.MaxBatch+1 {
		buf = make([]float64, srv.MaxBatch+1)
	}
	z, ok := t.predict(x, o, srv, buf)
	if !ok {
		step.Note = "model cannot evaluate the current estimate"
		return t.reject(s, step)
	}
	step.Predicted = z
	h, ok := t.jacobian(x, z, o, srv, buf)
	if !ok {
		step.Note = "model cannot evaluate the Jacobian"
		return t.reject(s, step)
	}
	y := [2]float64{o.TTFTms - z[0], o.ITLms - z[1]}
	ph, si, ok := t.innovationCovariance(p, h, o)
	if !ok {
		step.Note = "innovation covariance is singular"
		return t.reject(s, step)
	}
	step.NIS = y[0]*(si[0][0]*y[0]+si[0][1]*y[1]) + y[1]*(si[1][0]*y[0]+si[1][1]*y[1])
	if !(step.NIS < t.MaxNIS) {
		step.Note = fmt.Sprintf("innovation rejected: NIS %.2f >= %.3f", step.NIS, t.MaxNIS)
		return t.reject(s, step)
	}
	k := gain(ph, si)
	x = t.correct(x, k, y)
	next := s
	next.Params = t.clamp(paramsOf(x))
	np := t.updateCovariance(p, h, k, o)
	next.Covariance = np
	next.Updates++
	next.Rejections = 0
	next.NIS = step.NIS
	step.Accepted = true
	if !covarianceOK(np) {
		next.Covariance = t.initialCovariance(next.Params)
		next.Resets++
		step.Reset = true
		step.Note = "covariance lost positive definiteness: reset"
	}
	return next, step
}

// predictCovariance is the predict step of a random walk: P + Q.
func (t Tuner) predictCovariance(p [3][3]float64, x [3]float64) [3][3]float64 {
	for i := range x {
		p[i][i] += sq(t.ProcessNoise * x[i])
	}
	return p
}

// jacobian is H (2x3), the derivative of h at x (where h(x) = z), by
// forward differences.
func (t Tuner) jacobian(x [3]float64, z [2]float64, o Observation, srv Server, buf []float64) ([2][3]float64, bool) {
	var h [2][3]float64
	for j := range x {
		xd := x
		d := math.Max(1e-6*x[j], 1e-12)
		xd[j] += d
		zd, ok := t.predict(xd, o, srv, buf)
		if !ok {
			return h, false
		}
		for i := range 2 {
			h[i][j] = (zd[i] - z[i]) / d
		}
	}
	return h, true
}

// innovationCovariance returns P H^T and the inverse of the innovation
// covariance S = H P H^T + R; false when S is singular.
func (t Tuner) innovationCovariance(p [3][3]float64, h [2][3]float64, o Observation) ([3][2]float64, [2][2]float64, bool) {
	var ph [3][2]float64 // P H^T
	for i := range 3 {
		for k := range 2 {
			for j := range 3 {
				ph[i][k] += p[i][j] * h[k][j]
			}
		}
	}
	var sm [2][2]float64
	for a := range 2 {
		for b := range 2 {
			for j := range 3 {
				sm[a][b] += h[a][j] * ph[j][b]
			}
		}
	}
	sm[0][0] += sq(t.MeasurementNoise * o.TTFTms)
	sm[1][1] += sq(t.MeasurementNoise * o.ITLms)
	det := sm[0][0]*sm[1][1] - sm[0][1]*sm[1][0]
	if !(det > 0) || !decision.Finite(det) {
		return ph, [2][2]float64{}, false
	}
	si := [2][2]float64{{sm[1][1] / det, -sm[0][1] / det}, {-sm[1][0] / det, sm[0][0] / det}}
	return ph, si, true
}

// gain is K = P H^T S^-1 (3x2).
func gain(ph [3][2]float64, si [2][2]float64) [3][2]float64 {
	var k [3][2]float64
	for i := range 3 {
		for b := range 2 {
			k[i][b] = ph[i][0]*si[0][b] + ph[i][1]*si[1][b]
		}
	}
	return k
}

// correct is x + K y, each parameter's step bounded by MaxStep.
func (t Tuner) correct(x [3]float64, k [3][2]float64, y [2]float64) [3]float64 {
	for i := range x {
		dx := k[i][0]*y[0] + k[i][1]*y[1]
		limit := t.MaxStep * x[i]
		x[i] += math.Max(-limit, math.Min(limit, dx))
	}
	return x
}

// updateCovariance is the Joseph form P = (I-KH) P (I-KH)^T + K R K^T,
// symmetric and PSD.
func (t Tuner) updateCovariance(p [3][3]float64, h [2][3]float64, k [3][2]float64, o Observation) [3][3]float64 {
	var a [3][3]float64
	for i := range 3 {
		for j := range 3 {
			a[i][j] = -(k[i][0]*h[0][j] + k[i][1]*h[1][j])
			if i == j {
				a[i][j]++
			}
		}
	}
	r := [2]float64{sq(t.MeasurementNoise * o.TTFTms), sq(t.MeasurementNoise * o.ITLms)}
	var np [3][3]float64
	for i := range 3 {
		for j := range 3 {
			var v float64
			for m := range 3 {
				for n := range 3 {
					v += a[i][m] * p[m][n] * a[j][n]
				}
			}
			v += k[i][0]*r[0]*k[j][0] + k[i][1]*r[1]*k[j][1]
			np[i][j] = v
		}
	}
	for i := range 3 {
		for j := i + 1; j < 3; j++ {
			avg := (np[i][j] + np[j][i]) / 2
			np[i][j], np[j][i] = avg, avg
		}
	}
	return np
}

// reject keeps the estimate; after ResetAfter consecutive rejections it
// resets the covariance so that the next observation can move the state.
func (t Tuner) reject(s TunerState, step Step) (TunerState, Step) {
	next := s
	next.Rejections++
	next.NIS = step.NIS
	if t.ResetAfter > 0 && next.Rejections >= t.ResetAfter {
		next.Covariance = t.initialCovariance(next.Params)
		next.Rejections = 0
		next.Resets++
		step.Reset = true
		step.Note += fmt.Sprintf("; %d consecutive rejections: covariance reset", t.ResetAfter)
	}
	return next, step
}

func covarianceOK(p [3][3]float64) bool {
	for i := range 3 {
		for j := range 3 {
			if !decision.Finite(p[i][j]) {
				return false
			}
		}
		if !(p[i][i] > 0) {
			return false
		}
	}
	return true
}

func sq(x float64) float64 { return x * x }
