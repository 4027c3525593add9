package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// SLOPoint is one replica driven at a Poisson request rate by requests
// whose prompt and output lengths are drawn from a traffic mix, judged
// against an SLO as the fleet judges every request: its TTFT and its own
// time per output token ((last token - first token) / (output - 1)) each
// within their target.
type SLOPoint struct {
	RequestRate float64 `json:"requestRate"`
	// TTFTMs is the mean over the measured requests, ITLMs over those of
	// more than one output token (as AIPerf averages it: each request's
	// time per output token).
	TTFTMs float64 `json:"ttftMs"`
	ITLMs  float64 `json:"itlMs"`
	// TPOTP50Ms and TPOTP99Ms are quantiles of those requests' own time
	// per output token, the figure the ITL target is judged on (a request
	// of one token has none, and meets it).
	TPOTP50Ms float64 `json:"tpotP50Ms"`
	TPOTP99Ms float64 `json:"tpotP99Ms"`
	// OverTTFT and OverITL are the shares of the measured requests over
	// each target; SLOMet the share within both.
	OverTTFT float64 `json:"overTTFT"`
	OverITL  float64 `json:"overITL"`
	SLOMet   float64 `json:"sloMet"`
}

// Capacity benchmarks are sized for a tail: a share over a target of 1%
// rests on about a hundred requests.
const (
	capacityRequests     = 10_000
	capacityWarmRequests = 2_000
	// capacityResolution is the relative width the bisection for the
	// rate at the SLO stops at.
	capacityResolution = 0.01
)

// Mix is the prompt and output lengths a capacity benchmark draws its
// requests from: a trace's requests, their timing ignored.
type Mix []trace.Request

// fitting is the mix's requests one replica of spec can hold (vLLM refuses
// a request over its max model length), and how many it cannot.
func (m Mix) fitting(spec scenario.ServerSpec) (Mix, int) {
	s := newServer(spec)
	out := make(Mix, 0, len(m))
	for _, r := range m {
		if s.fits(max(r.Input, 1), max(r.Output, 1)) {
			out = append(out, r)
		}
	}
	return out, len(m) - len(out)
}

// BenchReplicaSLO drives one replica of spec at rate requests per second,
// Poisson (seeded), each request's lengths drawn from mix (which must fit
// the replica's KV cache: see Mix.fitting), and judges the requests after
// the first capacityWarmRequests against slo. A rate beyond the replica's
// capacity queues, and the TTFT misses show it.
func BenchReplicaSLO(spec scenario.ServerSpec, mix Mix, slo scenario.SLO, rate float64, seed uint64) (SLOPoint, error) {
	switch {
	case !(rate > 0 && rate <= MaxBenchRate):
		return SLOPoint{}, fmt.Errorf("request rate %v: must be in (0, %v] req/s", rate, MaxBenchRate)
	case len(mix) == 0:
		return SLOPoint{}, fmt.Errorf("no request of the mix fits the replica")
	}
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return SLOPoint{}, err
	}
	s := newServer(spec)
	n := capacityWarmRequests + capacityRequests
	// The same draws at every rate (common random numbers): the share
	// met then falls with the rate as the load does, not with the luck of
	// each rate's arrivals, and the bisection converges on it.
	arrivals := rand.New(rand.NewPCG(seed, 1))
	draws := rand.New(rand.NewPCG(seed, 2))
	reqs := make([]*seq, n)
	var at float64
	for i := range reqs {
		at += arrivals.ExpFloat64() / rate
		r := mix[draws.IntN(len(mix))]
		in, out := max(r.Input, 1), max(r.Output, 1)
		reqs[i] = &seq{req: int32(i), arrival: time.Duration(at * float64(time.Second)), input: in, output: out, prompt: in, firstToken: -1}
	}
	ttftTarget, itlTarget := slo.TTFT.D().Seconds()+1e-9, slo.ITL.D().Seconds()+1e-9
	var ttftSum, itlSum float64
	var overTTFT, overITL, met int
	tpot := make([]float64, 0, capacityRequests)
	_, err := driveOpen(s, reqs, capacityWarmRequests, capacityRequests, func(q *seq, now time.Duration) {
		if int(q.req) < capacityWarmRequests {
			return
		}
		ttft := (q.firstToken - q.arrival).Seconds()
		var itl float64
		if q.output > 1 {
			itl = (now - q.firstToken).Seconds() / float64(q.output-1)
			itlSum += itl
			tpot = append(tpot, itl)
		}
		ttftSum += ttft
		slowFirst, slowDecode := ttft > ttftTarget, itl > itlTarget
		if slowFirst {
			overTTFT++
		}
		if slowDecode {
			overITL++
		}
		if !slowFirst && !slowDecode {
			met++
		}
	})
	if err != nil {
		return SLOPoint{}, err
	}
	m := float64(capacityRequests)
	p := SLOPoint{
		RequestRate: rate,
		TTFTMs:      1000 * ttftSum / m,
		OverTTFT:    float64(overTTFT) / m,
		OverITL:     float64(overITL) / m,
		SLOMet:      float64(met) / m,
	}
	if len(tpot) > 0 {
		slices.Sort(tpot)
		quantile := func(q float64) float64 { return tpot[int(q*float64(len(tpot)-1))] }
		p.ITLMs, p.TPOTP50Ms, p.TPOTP99Ms = 1000*itlSum/float64(len(tpot)), 1000*quantile(0.5), 1000*quantile(0.99)
	}
	return p, nil
}

// RateAtSLO is the highest rate (req/s) at which one replica of spec meets
// slo's attainment on mix, found by bisection to capacityResolution, and
// the benchmark at that rate.
func RateAtSLO(spec scenario.ServerSpec, mix Mix, slo scenario.SLO, seed uint64) (SLOPoint, error) {
	meets := func(rate float64) (SLOPoint, bool, error) {
		p, err := BenchReplicaSLO(spec, mix, slo, rate, seed)
		return p, p.SLOMet+1e-9 >= slo.Attainment, err
	}
	// Bracket: from 1 req/s, halve until the SLO is met, double until
	// it is not.
	lo, hi := 0.0, 1.0
	var best SLOPoint
	for {
		p, ok, err := meets(hi)
		if err != nil {
			return SLOPoint{}, err
		}
		if !ok {
			break
		}
		lo, best, hi = hi, p, 2*hi
		if hi > MaxBenchRate {
			return best, nil
		}
	}
	for lo == 0 && hi > 1e-3 {
		hi /= 2
		p, ok, err := meets(hi)
		if err != nil {
			return SLOPoint{}, err
		}
		if ok {
			lo, best, hi = hi, p, 2*hi
			break
		}
	}
	if lo == 0 {
		return SLOPoint{}, fmt.Errorf("the SLO is not met even at %.3g req/s", hi)
	}
	for hi-lo > capacityResolution*lo {
		mid := (lo + hi) / 2
		p, ok, err := meets(mid)
		if err != nil {
			return SLOPoint{}, err
		}
		if ok {
			lo, best = mid, p
		} else {
			hi = mid
		}
	}
	return best, nil
}

// CapacityReport is `wva simulate capacity`'s answer: per variant, the
// rate one replica serves within the SLO on the mix, and the benchmark at
// each rate asked for.
type CapacityReport struct {
	SLO scenario.SLO `json:"slo"`
	// Requests is how many requests the mix holds, of MeanInput prompt
	// and MeanOutput output tokens on average.
	Requests   int               `json:"mixRequests"`
	MeanInput  float64           `json:"meanInputTokens"`
	MeanOutput float64           `json:"meanOutputTokens"`
	Variants   []CapacityVariant `json:"variants"`
}

// CapacityVariant is one variant's capacity benchmark.
type CapacityVariant struct {
	Name     string `json:"name"`
	Hardware string `json:"hardware"`
	// Refused counts the mix's requests one replica cannot hold; they
	// are left out of its benchmark.
	Refused int        `json:"refused,omitempty"`
	AtSLO   SLOPoint   `json:"atSLO"`
	Points  []SLOPoint `json:"points,omitempty"`
}

// CapacityScenario benchmarks one replica of each of the scenario's
// variants (or of the one named) on mix: its rate at the scenario's SLO
// and its figures at each of rates.
func CapacityScenario(sc scenario.Scenario, variant string, mix Mix, rates []float64) (CapacityReport, error) {
	stats := trace.Trace{Requests: mix}.Stats()
	rep := CapacityReport{SLO: sc.SLO, Requests: len(mix), MeanInput: stats.MeanInputTokens, MeanOutput: stats.MeanOutputTokens}
	for _, v := range sc.Variants {
		if variant != "" && v.Name != variant {
			continue
		}
		fit, refused := mix.fitting(v.Server.WithDefaults())
		cv := CapacityVariant{Name: v.Name, Hardware: v.HardwareDescription(), Refused: refused}
		var err error
		if cv.AtSLO, err = RateAtSLO(v.Server, fit, sc.SLO, sc.Seed); err != nil {
			return CapacityReport{}, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		for _, r := range rates {
			p, err := BenchReplicaSLO(v.Server, fit, sc.SLO, r, sc.Seed)
			if err != nil {
				return CapacityReport{}, fmt.Errorf("variant %s: %w", v.Name, err)
			}
			cv.Points = append(cv.Points, p)
		}
		rep.Variants = append(rep.Variants, cv)
	}
	if len(rep.Variants) == 0 {
		return CapacityReport{}, fmt.Errorf("the scenario has no variant %q", variant)
	}
	return rep, nil
}
