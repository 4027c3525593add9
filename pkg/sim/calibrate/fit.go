package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Params are the service model's per-step costs in milliseconds. A step
// that batches B tokens over sequences holding K KV tokens takes
// Alpha + Beta*B + Gamma*K (additive), or with an Overhead, the roofline
// Overhead + max(Alpha + Gamma*K, Beta*B): reading the weights and the KV
// or computing the tokens, whichever is longer.
type Params struct {
	Overhead float64 `json:"overhead,omitempty"`
	Alpha    float64 `json:"alpha"`
	Beta     float64 `json:"beta"`
	Gamma    float64 `json:"gamma"`
}

// Predicted is what the model says a benchmark point measures.
type Predicted struct {
	TTFTMs                float64
	ITLMs                 float64
	OutputTokensPerSecond float64
}

// Model predicts what pt measures, for params: the simulator's replica
// driven as the benchmark drove the real one (pt's concurrency or request
// rate, and its tokens per request).
type Model func(p Params, pt Point) (Predicted, error)

// PointFit is one measured point beside the fitted model's prediction.
type PointFit struct {
	Point     Point     `json:"point"`
	Predicted Predicted `json:"predicted"`
	// Errors are (predicted - measured) / measured.
	TTFTError       float64 `json:"ttftError"`
	ITLError        float64 `json:"itlError"`
	ThroughputError float64 `json:"throughputError"`
}

// Worst is the point's largest relative error, in absolute value.
func (f PointFit) Worst() float64 {
	return math.Max(math.Abs(f.TTFTError), math.Max(math.Abs(f.ITLError), math.Abs(f.ThroughputError)))
}

// Result is a fit: the parameters and every point's errors with them.
type Result struct {
	Params Params     `json:"params"`
	Points []PointFit `json:"points"`
	// Evaluations counts model runs of the whole point set.
	Evaluations int `json:"evaluations"`
}

// Worst is the largest relative error over every point and measure.
func (r Result) Worst() float64 {
	w := 0.0
	for _, p := range r.Points {
		w = math.Max(w, p.Worst())
	}
	return w
}

// Limits of a fit: each parameter stays within a factor of 1e3 of its
// start (a fit that runs further is modelling something else), and the
// search stops when its simplex spans under 0.1%.
const (
	maxLogSpan  = 6.9 // ln(1000)
	minLogStep  = 1e-3
	maxFitEvals = 4000
	maxRestarts = 8
)

// Fit finds the parameters whose predictions are nearest the measured
// points, in the least-squares sense over relative errors of TTFT, ITL and
// output throughput; roofline fits an Overhead too. The model is a
// discrete-event simulation, piecewise smooth at best, so the search is
// derivative-free (Nelder-Mead) in log space: each parameter stays
// positive and scales, not offsets, move it.
func Fit(points []Point, model Model, roofline bool) (Result, error) {
	if len(points) == 0 {
		return Result{}, errors.New("no benchmark points to fit")
	}
	origin := toLog(initialGuess(points, roofline))
	evals := 0
	// errorsOf returns the sum of squared relative errors and the worst
	// one.
	errorsOf := func(x []float64) (sum, worst float64) {
		evals++
		fits, err := predictAll(points, model, fromLog(x))
		if err != nil {
			return math.Inf(1), math.Inf(1)
		}
		for _, f := range fits {
			sum += f.TTFTError*f.TTFTError + f.ITLError*f.ITLError + f.ThroughputError*f.ThroughputError
			worst = math.Max(worst, f.Worst())
		}
		return sum, worst
	}
	leastSquares := func(x []float64) float64 { s, _ := errorsOf(x); return s }
	best := minimize(origin, origin, leastSquares, &evals)
	// A point is accepted within a tolerance of its own, so the fit then
	// narrows the worst point from the least-squares answer (the sum of
	// squares, scaled down, breaks ties between equal worst points);
	// minimize keeps that answer unless it narrows the worst point.
	minimax := func(x []float64) float64 { s, w := errorsOf(x); return w + 1e-3*s }
	best = minimize(best, origin, minimax, &evals)
	p := fromLog(best)
	fits, err := predictAll(points, model, p)
	if err != nil {
		return Result{}, fmt.Errorf("the fitted model cannot run the points: %w", err)
	}
	return Result{Params: p, Points: fits, Evaluations: evals}, nil
}

// minimize runs Nelder-Mead from x, restarted from its own answer until a
// restart gains nothing (a kink of the roofline's max, or of a worst
// point, can stall one pass with its step shrunk).
func minimize(x, origin []float64, cost func([]float64) float64, evals *int) []float64 {
	best, bestCost := x, cost(x)
	for restart := 0; restart < maxRestarts && *evals < maxFitEvals; restart++ {
		next := nelderMead(best, origin, cost, maxFitEvals-*evals)
		c := cost(next)
		if c >= bestCost*(1-1e-9) {
			break
		}
		best, bestCost = next, c
	}
	return best
}

// initialGuess reads the parameters off the lightest and heaviest points:
// at one sequence a decode step is about Alpha (plus its KV term and the
// overhead), a prompt costs about Beta per token, and ITL grows with the
// KV held.
func initialGuess(points []Point, roofline bool) Params {
	sorted := append([]Point(nil), points...)
	sort.Slice(sorted, func(i, j int) bool { return inFlight(sorted[i]) < inFlight(sorted[j]) })
	lo, hi := sorted[0], sorted[len(sorted)-1]
	alpha := 0.8 * lo.ITLMs
	beta := math.Max(0.2*lo.TTFTMs/lo.InputTokens, 1e-4)
	kvLo := inFlight(lo) * (lo.InputTokens + lo.OutputTokens/2)
	kvHi := inFlight(hi) * (hi.InputTokens + hi.OutputTokens/2)
	gamma := 0.2 * lo.ITLMs / math.Max(kvLo, 1)
	if kvHi > kvLo && hi.ITLMs > lo.ITLMs {
		gamma = 0.5 * (hi.ITLMs - lo.ITLMs) / (kvHi - kvLo)
	}
	p := Params{Alpha: alpha, Beta: beta, Gamma: math.Max(gamma, 1e-9)}
	if roofline {
		p.Overhead, p.Alpha, p.Beta = 0.4*lo.ITLMs, 0.5*lo.ITLMs, math.Max(lo.TTFTMs/lo.InputTokens, 1e-4)
	}
	return p
}

// inFlight is how many requests a point held at once: its concurrency, or
// for a rate-driven run, Little's law over its measured latencies.
func inFlight(pt Point) float64 {
	if pt.Concurrency > 0 {
		return float64(pt.Concurrency)
	}
	e2e := (pt.TTFTMs + math.Max(pt.OutputTokens-1, 0)*pt.ITLMs) / 1000
	return math.Max(pt.RequestRate*e2e, 1)
}

func predictAll(points []Point, model Model, p Params) ([]PointFit, error) {
	fits := make([]PointFit, len(points))
	for i, pt := range points {
		pred, err := model(p, pt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pt.Source, err)
		}
		fits[i] = Compare(pt, pred)
	}
	return fits, nil
}

// Compare is a prediction beside the measured point, with its relative
// errors.
func Compare(pt Point, pred Predicted) PointFit {
	return PointFit{Point: pt, Predicted: pred,
		TTFTError:       pred.TTFTMs/pt.TTFTMs - 1,
		ITLError:        pred.ITLMs/pt.ITLMs - 1,
		ThroughputError: pred.OutputTokensPerSecond/pt.OutputTokensPerSecond - 1}
}

// toLog is the search's coordinates: the logs of Alpha, Beta, Gamma and,
// for a roofline, Overhead.
func toLog(p Params) []float64 {
	x := []float64{math.Log(p.Alpha), math.Log(p.Beta), math.Log(p.Gamma)}
	if p.Overhead > 0 {
		x = append(x, math.Log(p.Overhead))
	}
	return x
}

func fromLog(x []float64) Params {
	p := Params{Alpha: math.Exp(x[0]), Beta: math.Exp(x[1]), Gamma: math.Exp(x[2])}
	if len(x) > 3 {
		p.Overhead = math.Exp(x[3])
	}
	return p
}

// nelderMead minimizes cost from x0 with Nelder and Mead's simplex
// (reflect, expand, contract, shrink), which follows the ridges a
// coordinate search stalls on (an overhead traded against the weight
// reads). Points farther than maxLogSpan from origin cost +Inf.
func nelderMead(x0, origin []float64, cost func([]float64) float64, budget int) []float64 {
	n := len(x0)
	f := func(x []float64) float64 {
		for i := range x {
			if math.Abs(x[i]-origin[i]) > maxLogSpan {
				return math.Inf(1)
			}
		}
		return cost(x)
	}
	simplex := make([][]float64, n+1)
	values := make([]float64, n+1)
	for i := range simplex {
		simplex[i] = slices.Clone(x0)
		if i > 0 {
			simplex[i][i-1] += 0.5
		}
		values[i] = f(simplex[i])
	}
	evals := n + 1
	towards := func(from, to []float64, t float64) []float64 {
		y := make([]float64, n)
		for i := range y {
			y[i] = from[i] + t*(to[i]-from[i])
		}
		return y
	}
	for evals < budget {
		order := make([]int, n+1)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return values[order[a]] < values[order[b]] })
		sorted, vals := make([][]float64, n+1), make([]float64, n+1)
		for i, o := range order {
			sorted[i], vals[i] = simplex[o], values[o]
		}
		simplex, values = sorted, vals
		size := 0.0
		for _, x := range simplex[1:] {
			for i := range x {
				size = math.Max(size, math.Abs(x[i]-simplex[0][i]))
			}
		}
		if size < minLogStep {
			break
		}
		centroid := make([]float64, n)
		for _, x := range simplex[:n] {
			for i := range x {
				centroid[i] += x[i] / float64(n)
			}
		}
		worst := simplex[n]
		reflected := towards(centroid, worst, -1)
		fr := f(reflected)
		evals++
		switch {
		case fr < values[0]:
			expanded := towards(centroid, worst, -2)
			evals++
			if fe := f(expanded); fe < fr {
				simplex[n], values[n] = expanded, fe
			} else {
				simplex[n], values[n] = reflected, fr
			}
		case fr < values[n-1]:
			simplex[n], values[n] = reflected, fr
		default:
			contracted := towards(centroid, worst, 0.5)
			evals++
			if fc := f(contracted); fc < values[n] {
				simplex[n], values[n] = contracted, fc
				continue
			}
			for i := 1; i <= n; i++ {
				simplex[i] = towards(simplex[0], simplex[i], 0.5)
				values[i] = f(simplex[i])
				evals++
			}
		}
	}
	best := 0
	for i := range values {
		if values[i] < values[best] {
			best = i
		}
	}
	return simplex[best]
}
