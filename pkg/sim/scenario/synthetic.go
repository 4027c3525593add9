package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// Synthetic shapes.
const (
	ShapeSteady  = "steady"
	ShapeRamp    = "ramp"
	ShapeSpike   = "spike"
	ShapeDiurnal = "diurnal"
	ShapeBursty  = "bursty"
	ShapeDay     = "day"
	ShapeWorkday = "workday"
	ShapeWeek    = "week"
)

// Shapes lists the synthetic shapes.
var Shapes = []string{ShapeSteady, ShapeRamp, ShapeSpike, ShapeDiurnal, ShapeBursty, ShapeDay, ShapeWorkday, ShapeWeek}

// Synthetic describes a generated trace: Poisson arrivals whose rate follows
// the shape, lognormal prompt and output lengths.
type Synthetic struct {
	// Shape: steady (BaseRate), ramp (BaseRate to PeakRate), spike
	// (BaseRate, PeakRate from SpikeStart for SpikeLength; by default
	// the second third's first half), diurnal (one
	// cosine day from BaseRate up to PeakRate and back), bursty (BaseRate
	// with random bursts up to PeakRate, 3-12 minutes each), day (a day
	// from midnight: lowest at 04:00 (BaseRate), highest at 16:00
	// (PeakRate), with bursts about every 40 minutes lasting 3-12 minutes
	// that raise the rate of the hour by 30-100%), workday (days from
	// midnight at BaseRate, rising to PeakRate between 09:00 and 09:15,
	// 70% of it over lunch, 12:00-13:00, back to BaseRate between 17:00
	// and 19:00, with a day's bursts; every day alike), week (weeks from
	// Monday midnight: a workday from Monday to Friday, BaseRate with a
	// day's bursts on Saturday and Sunday).
	Shape    string          `json:"shape"`
	Duration params.Duration `json:"duration"`
	// Rates in requests per second.
	BaseRate    float64         `json:"baseRate"`
	PeakRate    float64         `json:"peakRate"`
	SpikeStart  params.Duration `json:"spikeStart,omitempty"`
	SpikeLength params.Duration `json:"spikeLength,omitempty"`
	// Mean prompt and output lengths in tokens, with lognormal spread Sigma
	// (0 = 0.8), clipped to [1, Max*].
	InputTokens     float64 `json:"inputTokens"`
	OutputTokens    float64 `json:"outputTokens"`
	Sigma           float64 `json:"sigma,omitempty"`
	MaxInputTokens  int32   `json:"maxInputTokens,omitempty"`
	MaxOutputTokens int32   `json:"maxOutputTokens,omitempty"`
}

// WithDefaults places an unspecified spike in the second third of the
// duration, lasting a sixth of it.
func (s Synthetic) WithDefaults() Synthetic {
	if s.Shape == ShapeSpike && s.SpikeLength == 0 && s.SpikeStart == 0 {
		s.SpikeStart, s.SpikeLength = s.Duration/3, s.Duration/6
	}
	return s
}

// Validate names the first bad field; numbers must lie in their ranges
// (bounds.go) and the requests drawn are bounded before any is drawn.
func (s Synthetic) Validate() error {
	s = s.WithDefaults()
	known := false
	for _, k := range Shapes {
		known = known || s.Shape == k
	}
	if !known {
		return fmt.Errorf("traffic.synthetic.shape %q: want one of %v", s.Shape, Shapes)
	}
	if err := trafficDurationRange.check("traffic.synthetic.duration", s.Duration.D()); err != nil {
		return err
	}
	if err := rateRange.check("traffic.synthetic.baseRate", s.BaseRate); err != nil {
		return err
	}
	peakRange := rateRange // steady serves baseRate; peakRate still paces the draw
	if s.Shape != ShapeSteady {
		peakRange.lo = s.BaseRate
	}
	if err := peakRange.check("traffic.synthetic.peakRate", s.PeakRate); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
		r    floatRange
	}{
		{"inputTokens", s.InputTokens, tokensRange},
		{"outputTokens", s.OutputTokens, tokensRange},
		{"sigma", s.Sigma, sigmaRange},
		{"maxInputTokens", float64(s.MaxInputTokens), maxTokensRange},
		{"maxOutputTokens", float64(s.MaxOutputTokens), maxTokensRange},
	} {
		if err := f.r.check("traffic.synthetic."+f.name, f.v); err != nil {
			return err
		}
	}
	if s.Shape == ShapeSpike && (s.SpikeLength <= 0 || s.SpikeStart < 0 || s.SpikeStart >= s.Duration) {
		return fmt.Errorf("traffic.synthetic.spikeStart %s / spikeLength %s: the spike must start inside the duration %s and last > 0",
			s.SpikeStart, s.SpikeLength, s.Duration)
	}
	// Bound the requests before drawing any: Generate draws candidates at
	// the peak rate over the duration; a day keeps about half of them.
	if n := s.drawn() * s.Duration.D().Seconds(); n > trace.MaxRequests {
		return &FieldError{Field: "traffic.synthetic", Err: fmt.Errorf("%v req/s for %s is %.3g requests: at most %d",
			s.drawn(), s.Duration, n, trace.MaxRequests)}
	}
	return nil
}

// drawn bounds the mean rate of the requests Generate keeps: the peak,
// except for days, whose bursts (at most dayBurstMax) lift the mean of
// their curve: (base + peak) / 2 for a day or a workday, and for a week
// five workdays in seven at their mean level, the weekend at the base.
func (s Synthetic) drawn() float64 {
	switch {
	case s.Shape == ShapeWeek:
		return dayBurstMax * (s.BaseRate + (s.PeakRate-s.BaseRate)*workdayMean*5/7)
	case s.dayLike():
		return dayBurstMax * (s.BaseRate + s.PeakRate) / 2
	}
	return s.peak()
}

// dayLike says the shape is days of hours with random bursts.
func (s Synthetic) dayLike() bool {
	return s.Shape == ShapeDay || s.Shape == ShapeWorkday || s.Shape == ShapeWeek
}

// workdayMean bounds workdayLevel's mean over a day (8.575 of 24 hours).
const workdayMean = 0.36

// dayBurstMax is the most a day's burst multiplies the rate by.
const dayBurstMax = 2.0

// peak is the rate Generate draws candidates at.
func (s Synthetic) peak() float64 {
	p := math.Max(s.BaseRate, s.PeakRate)
	if s.dayLike() {
		p *= dayBurstMax
	}
	return p
}

// workdayLevel is a workday's rate at hour h between the night's (0) and
// the peak (1).
func workdayLevel(h float64) float64 {
	switch {
	case h < 9 || h >= 19:
		return 0
	case h < 9.25:
		return (h - 9) / 0.25
	case h >= 12 && h < 13:
		return 0.7
	case h < 17:
		return 1
	default:
		return 1 - (h-17)/2
	}
}

type burst struct {
	start, end time.Duration
	rate       float64
}

// drawBursts draws bursts over d starting about every mean apart (an
// exponential gap) and lasting 3-12 minutes; level turns a uniform draw
// into the burst's rate. The draws come in that order per burst (gap,
// length, level), so a seed draws the same trace.
func drawBursts(rng *rand.Rand, d, mean time.Duration, level func(u float64) float64) []burst {
	var bursts []burst
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() * float64(mean))
		if at >= d {
			return bursts
		}
		length := 3*time.Minute + time.Duration(rng.Float64()*float64(9*time.Minute))
		bursts = append(bursts, burst{start: at, end: at + length, rate: level(rng.Float64())})
	}
}

// Generate draws the trace. Deterministic for a seed.
func (s Synthetic) Generate(seed uint64) (trace.Trace, error) {
	if err := s.Validate(); err != nil {
		return trace.Trace{}, err
	}
	s = s.WithDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x73796e7468))
	d := s.Duration.D()
	var bursts []burst
	switch s.Shape {
	case ShapeBursty:
		// Bursts start about every 10 minutes at a rate between the
		// midpoint and the peak.
		bursts = drawBursts(rng, d, 10*time.Minute, func(u float64) float64 {
			return s.BaseRate + (s.PeakRate-s.BaseRate)*(0.5+0.5*u)
		})
	case ShapeDay, ShapeWorkday, ShapeWeek:
		// Bursts start about every 40 minutes and multiply the hour's
		// rate; rate holds the factor.
		bursts = drawBursts(rng, d, 40*time.Minute, func(u float64) float64 {
			return 1.3 + (dayBurstMax-1.3)*u
		})
	}
	rate := func(t time.Duration) float64 {
		x := float64(t) / float64(d)
		switch s.Shape {
		case ShapeRamp:
			return s.BaseRate + (s.PeakRate-s.BaseRate)*x
		case ShapeSpike:
			if t >= s.SpikeStart.D() && t < s.SpikeStart.D()+s.SpikeLength.D() {
				return s.PeakRate
			}
			return s.BaseRate
		case ShapeDiurnal:
			return s.BaseRate + (s.PeakRate-s.BaseRate)*(1-math.Cos(2*math.Pi*x))/2
		case ShapeBursty:
			r := s.BaseRate
			for _, b := range bursts {
				if t >= b.start && t < b.end {
					r = math.Max(r, b.rate)
				}
			}
			return r
		case ShapeDay, ShapeWorkday, ShapeWeek:
			// The hour of the day, whatever the duration: 24h is one day.
			h := math.Mod(t.Hours(), 24)
			r := s.BaseRate + (s.PeakRate-s.BaseRate)*(1-math.Cos(2*math.Pi*(h-4)/24))/2
			switch weekday := int(t.Hours()/24) % 7; {
			case s.Shape == ShapeWorkday, s.Shape == ShapeWeek && weekday < 5:
				r = s.BaseRate + (s.PeakRate-s.BaseRate)*workdayLevel(h)
			case s.Shape == ShapeWeek:
				r = s.BaseRate
			}
			f := 1.0
			for _, b := range bursts {
				if t >= b.start && t < b.end {
					f = math.Max(f, b.rate)
				}
			}
			return r * f
		}
		return s.BaseRate
	}
	peak := s.peak()
	t := trace.Trace{Name: fmt.Sprintf("synthetic %s", s.Shape)}
	if peak <= 0 {
		return t, nil
	}
	sigma := s.Sigma
	if sigma <= 0 {
		sigma = 0.8
	}
	maxIn, maxOut := s.MaxInputTokens, s.MaxOutputTokens
	if maxIn <= 0 {
		maxIn = int32(math.Min(8*s.InputTokens, trace.MaxTokens))
	}
	if maxOut <= 0 {
		maxOut = int32(math.Min(8*s.OutputTokens, trace.MaxTokens))
	}
	lognormal := func(mean float64, hi int32) int32 {
		mu := math.Log(mean) - sigma*sigma/2
		v := math.Round(math.Exp(mu + sigma*rng.NormFloat64()))
		return int32(math.Max(1, math.Min(v, float64(hi))))
	}
	// Thinning: candidates at the peak rate, kept with probability
	// rate(t)/peak.
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / peak * float64(time.Second))
		if at >= d {
			break
		}
		if rng.Float64()*peak >= rate(at) {
			continue
		}
		if len(t.Requests) == trace.MaxRequests {
			return trace.Trace{}, fmt.Errorf("traffic.synthetic: more than %d requests drawn: at most %d", trace.MaxRequests, trace.MaxRequests)
		}
		t.Requests = append(t.Requests, trace.Request{Arrival: at, Input: lognormal(s.InputTokens, maxIn), Output: lognormal(s.OutputTokens, maxOut)})
	}
	sort.SliceStable(t.Requests, func(i, j int) bool { return t.Requests[i].Arrival < t.Requests[j].Arrival })
	return t, nil
}
