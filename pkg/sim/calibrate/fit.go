package calibrate

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Params are the service model's per-step costs in milliseconds: a step
// that batches B tokens over sequences holding K KV tokens takes
// Alpha + Beta*B + Gamma*K.
type Params struct {
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
	Gamma float64 `json:"gamma"`
}

// Predicted is what the model says a benchmark point measures.
type Predicted struct {
	TTFTMs                float64
	ITLMs                 float64
	OutputTokensPerSecond float64
}

// Model predicts one concurrency-driven point for params: the simulator's
// replica driven as the benchmark drove the real one.
type Model func(p Params, inputTokens, outputTokens int32, concurrency int) (Predicted, error)

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
// search stops at steps under 0.1%.
const (
	maxLogSpan  = 6.9 // ln(1000)
	minLogStep  = 1e-3
	maxFitEvals = 2000
)

// Fit finds the parameters whose predictions are nearest the measured
// points, in the least-squares sense over relative errors of TTFT, ITL and
// output throughput. The model is a discrete-event simulation, piecewise
// smooth at best, so the search is a derivative-free pattern search in
// log space: each parameter stays positive and scales, not offsets, move it.
func Fit(points []Point, model Model) (Result, error) {
	if len(points) == 0 {
		return Result{}, errors.New("no benchmark points to fit")
	}
	for _, p := range points {
		if p.Concurrency < 1 {
			return Result{}, fmt.Errorf("%s: driven by a request rate (%.3g req/s): only concurrency-driven runs can be fitted (`vllm bench serve --max-concurrency`, AIPerf/genai-perf --concurrency)", p.Source, p.RequestRate)
		}
	}
	start := initialGuess(points)
	evals := 0
	cost := func(x [3]float64) float64 {
		evals++
		fits, err := predictAll(points, model, fromLog(x))
		if err != nil {
			return math.Inf(1)
		}
		sum := 0.0
		for _, f := range fits {
			sum += f.TTFTError*f.TTFTError + f.ITLError*f.ITLError + f.ThroughputError*f.ThroughputError
		}
		return sum
	}
	x0 := toLog(start)
	best := patternSearch(x0, cost)
	p := fromLog(best)
	fits, err := predictAll(points, model, p)
	if err != nil {
		return Result{}, fmt.Errorf("the fitted model cannot run the points: %w", err)
	}
	return Result{Params: p, Points: fits, Evaluations: evals}, nil
}

// initialGuess reads the parameters off the lightest and heaviest points:
// at one sequence a decode step is about Alpha (plus its KV term), a
// prompt costs about Beta per token, and ITL grows with the KV held.
func initialGuess(points []Point) Params {
	sorted := append([]Point(nil), points...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Concurrency < sorted[j].Concurrency })
	lo, hi := sorted[0], sorted[len(sorted)-1]
	alpha := 0.8 * lo.ITLMs
	beta := math.Max(0.2*lo.TTFTMs/lo.InputTokens, 1e-4)
	kvLo := float64(lo.Concurrency) * (lo.InputTokens + lo.OutputTokens/2)
	kvHi := float64(hi.Concurrency) * (hi.InputTokens + hi.OutputTokens/2)
	gamma := 0.2 * lo.ITLMs / math.Max(kvLo, 1)
	if kvHi > kvLo && hi.ITLMs > lo.ITLMs {
		gamma = 0.5 * (hi.ITLMs - lo.ITLMs) / (kvHi - kvLo)
	}
	return Params{Alpha: alpha, Beta: beta, Gamma: math.Max(gamma, 1e-9)}
}

func predictAll(points []Point, model Model, p Params) ([]PointFit, error) {
	fits := make([]PointFit, len(points))
	for i, pt := range points {
		pred, err := model(p, int32(math.Round(pt.InputTokens)), int32(math.Round(pt.OutputTokens)), pt.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pt.Source, err)
		}
		fits[i] = PointFit{Point: pt, Predicted: pred,
			TTFTError:       pred.TTFTMs/pt.TTFTMs - 1,
			ITLError:        pred.ITLMs/pt.ITLMs - 1,
			ThroughputError: pred.OutputTokensPerSecond/pt.OutputTokensPerSecond - 1}
	}
	return fits, nil
}

func toLog(p Params) [3]float64 {
	return [3]float64{math.Log(p.Alpha), math.Log(p.Beta), math.Log(p.Gamma)}
}

func fromLog(x [3]float64) Params {
	return Params{Alpha: math.Exp(x[0]), Beta: math.Exp(x[1]), Gamma: math.Exp(x[2])}
}

// patternSearch is Hooke and Jeeves' search: probe each coordinate up and
// down, keep what lowers the cost, and halve the step when nothing does.
func patternSearch(x0 [3]float64, cost func([3]float64) float64) [3]float64 {
	x, fx := x0, cost(x0)
	step := 0.5
	evals := 1
	for step >= minLogStep && evals < maxFitEvals {
		improved := false
		for i := range x {
			for _, dir := range []float64{1, -1} {
				y := x
				y[i] += dir * step
				if math.Abs(y[i]-x0[i]) > maxLogSpan {
					continue
				}
				evals++
				if fy := cost(y); fy < fx {
					x, fx, improved = y, fy, true
					break
				}
			}
		}
		if !improved {
			step /= 2
		}
	}
	return x
}
