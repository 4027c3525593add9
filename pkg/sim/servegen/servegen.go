// Package servegen generates request traces from Alibaba's ServeGen
// production workload data (github.com/alibaba/ServeGen, Apache-2.0) the way
// ServeGen's own generator does (servegen/construct.py, generate_workload
// with a rate function): per client and time window, arrivals drawn from the
// window's Gamma or Weibull inter-arrival pattern, and prompt and output
// lengths from the client's token distributions.
package servegen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/sim/trace"
)

// Pattern is a window's inter-arrival distribution.
type Pattern uint8

const (
	// None: the client sent no request in the window.
	None Pattern = iota
	// Gamma inter-arrival times, Shape k and Scale theta.
	Gamma
	// Weibull inter-arrival times, Shape c and Scale lambda.
	Weibull
)

// Window is one client's arrivals in one trace window.
type Window struct {
	Rate    float64 // requests/s
	Pattern Pattern
	Shape   float64
	Scale   float64
}

// Dist is a distribution over token counts: Tokens ascending, Cum the
// cumulative probability up to each.
type Dist struct {
	Tokens []int32
	Cum    []float64
}

// sample is ServeGen's searchsorted on the cumulative pdf: the first count
// whose cumulative probability reaches u (the largest when rounding leaves
// the total just under u).
func (d Dist) sample(u float64) int32 {
	i := sort.SearchFloat64s(d.Cum, u)
	if i == len(d.Cum) {
		i--
	}
	return d.Tokens[i]
}

// Mean is the distribution's mean token count.
func (d Dist) Mean() float64 {
	var m, prev float64
	for i, c := range d.Cum {
		m += float64(d.Tokens[i]) * (c - prev)
		prev = c
	}
	return m
}

// Dataset is a client's token distributions from At on.
type Dataset struct {
	At            time.Duration
	Input, Output Dist
}

// Client is one client of the pool.
type Client struct {
	ID      int
	Windows []Window  // one per Pool.Starts
	Data    []Dataset // ascending At; empty when the client has no dataset
}

// dataAt is the dataset in force at t: the latest one at or before it.
func (c Client) dataAt(t time.Duration) *Dataset {
	i := sort.Search(len(c.Data), func(i int) bool { return c.Data[i].At > t })
	if i == 0 {
		return nil
	}
	return &c.Data[i-1]
}

// Pool is the clients of one model's data, on trace windows common to all.
type Pool struct {
	Name    string
	Starts  []time.Duration // window starts, ascending
	Clients []Client        // by ID
}

// End is the end of the last window, which lasts as long as the one before.
func (p Pool) End() time.Duration {
	n := len(p.Starts)
	if n < 2 {
		return 0
	}
	return p.Starts[n-1] + p.Starts[n-1] - p.Starts[n-2]
}

func (p Pool) windowEnd(i int) time.Duration {
	if i+1 < len(p.Starts) {
		return p.Starts[i+1]
	}
	return p.End()
}

// Generate returns the requests of [from, to), arrivals relative to from.
// The target rate of each window is the aggregate rate of all clients,
// scaled so that its mean over the span is meanRate requests/s (the day's
// shape kept). As in ServeGen, each window's target is shared among the
// clients with token data in proportion to their rates, so clients without
// data count in the shape but send nothing; a client's n = ceil(rate x
// window) inter-arrival times are rescaled to sum to the window and the
// arrivals at or past its end dropped; one uniform draw per request picks
// both its prompt and its output length (ServeGen samples every field with
// the same draw). Deterministic for a seed.
func Generate(pool Pool, from, to time.Duration, meanRate float64, seed uint64) (trace.Trace, error) {
	if from < 0 || to <= from {
		return trace.Trace{}, fmt.Errorf("span [%v, %v): want 0 <= from < to", from, to)
	}
	if end := pool.End(); to > end {
		return trace.Trace{}, fmt.Errorf("span [%v, %v): the data %s covers [0, %v)", from, to, pool.Name, end)
	}
	if to-from > trace.MaxSpan {
		return trace.Trace{}, fmt.Errorf("span [%v, %v): at most %v (31 days) is accepted", from, to, trace.MaxSpan)
	}
	span := (to - from).Seconds()
	if !(meanRate > 0) || math.IsInf(meanRate, 0) {
		return trace.Trace{}, fmt.Errorf("mean rate %v: must be a finite number > 0", meanRate)
	}
	if n := meanRate * span; n > trace.MaxRequests {
		return trace.Trace{}, fmt.Errorf("mean rate %v over %v makes %.0f requests: at most %d are accepted", meanRate, to-from, n, trace.MaxRequests)
	}

	// The windows overlapping the span, cut to it, and their aggregate rates.
	type win struct {
		i          int
		start, end time.Duration // cut to [from, to)
		aggregate  float64
	}
	var wins []win
	var weighted float64
	for i, s := range pool.Starts {
		start, end := max(s, from), min(pool.windowEnd(i), to)
		if end <= start {
			continue
		}
		w := win{i: i, start: start, end: end}
		for _, c := range pool.Clients {
			if c.Windows[i].Pattern != None {
				w.aggregate += c.Windows[i].Rate
			}
		}
		weighted += w.aggregate * (end - start).Seconds()
		wins = append(wins, w)
	}
	if weighted == 0 {
		return trace.Trace{}, fmt.Errorf("the data %s has no requests in [%v, %v)", pool.Name, from, to)
	}
	scale := meanRate * span / weighted

	rng := rand.New(rand.NewPCG(seed, 0x73657276656765))
	out := trace.Trace{Name: fmt.Sprintf("servegen %s %v-%v", pool.Name, from, to)}
	var iats []float64
	for _, w := range wins {
		var withData float64
		for _, c := range pool.Clients {
			if c.Windows[w.i].Pattern != None && c.dataAt(pool.Starts[w.i]) != nil {
				withData += c.Windows[w.i].Rate
			}
		}
		if withData == 0 {
			continue
		}
		size := (w.end - w.start).Seconds()
		for _, c := range pool.Clients {
			cw := c.Windows[w.i]
			data := c.dataAt(pool.Starts[w.i])
			if cw.Pattern == None || data == nil {
				continue
			}
			target := w.aggregate * scale * cw.Rate / withData
			n := int(math.Ceil(target * size))
			if n == 0 {
				continue
			}
			iats = iats[:0]
			var sum float64
			for range n {
				x := draw(rng, cw)
				iats = append(iats, x)
				sum += x
			}
			if !(sum > 0) || math.IsInf(sum, 0) {
				continue // every draw underflowed: ServeGen's NaNs are dropped too
			}
			f := size / sum
			var at float64
			var kept int
			for _, x := range iats {
				at += x * f
				if at >= size {
					break
				}
				kept++
			}
			if len(out.Requests)+kept > trace.MaxRequests {
				return trace.Trace{}, fmt.Errorf("more than %d requests in [%v, %v): at most %d are accepted", trace.MaxRequests, from, to, trace.MaxRequests)
			}
			at = 0
			for _, x := range iats[:kept] {
				at += x * f
				// Truncated, and kept inside the window, which rounding
				// at*1e9 up to its end would leave.
				offset := min(time.Duration(at*1e9), w.end-w.start-1)
				u := rng.Float64()
				out.Requests = append(out.Requests, trace.Request{
					Arrival: w.start - from + offset,
					Input:   max(data.Input.sample(u), 1),
					Output:  max(data.Output.sample(u), 1),
				})
			}
		}
	}
	sort.SliceStable(out.Requests, func(i, j int) bool { return out.Requests[i].Arrival < out.Requests[j].Arrival })
	return out, nil
}

// draw is one inter-arrival time of the window's pattern.
func draw(rng *rand.Rand, w Window) float64 {
	if w.Pattern == Weibull {
		return w.Scale * math.Pow(-math.Log(1-rng.Float64()), 1/w.Shape)
	}
	return w.Scale * gamma(rng, w.Shape)
}

// gamma draws from Gamma(a, 1) by Marsaglia and Tsang's method (ACM TOMS
// 26(3), 2000), with their boost for a < 1: Gamma(a+1) x U^(1/a).
func gamma(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gamma(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		var x, v float64
		for {
			x = rng.NormFloat64()
			v = 1 + c*x
			if v > 0 {
				break
			}
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
