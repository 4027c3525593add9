package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/fit"
)

// A replica ordered now serves one start-up delay later, so demand that
// is rising steadily is planned at the level it will reach by then. The
// growth is the least-squares slope of the arrival rate over the last
// trendHorizons start-up delays, lowered by trendStdErrs standard errors
// so that only growth the window shows clearly counts: a plateau's noise
// leaves nothing, and a burst's step, which a line fits badly, counts for
// less than half its height (2.1 req/s five minutes after a 2 -> 8 step).
//
// The window is at least minTrendWindow: a step in arrivals reaches the
// planner as a ramp one rate window long (the collector's 1m rate), which
// a shorter window would extrapolate as growth.
//
// Growth must also still be under way: the slope of the last trendRecent
// is a bound on it. A burst's step followed by its plateau tilts the
// window's line for minutes after arrivals stopped rising (9 req/s
// forecast four minutes after a 6 -> 26 req/s step), where the last two
// rate windows are flat; a ramp rises through them too. After a step (the
// arrivals off the window's line) their slope counts only beyond
// trendStdErrs standard errors of the rates' Poisson noise: a plateau's
// last two minutes rise or fall by chance.
const (
	trendHorizons  = 3
	trendStdErrs   = 2
	minTrendWindow = 5 * time.Minute
	trendRecent    = 2 * decision.RateWindow
)

// trend is what the arrivals' line over the trend's window says.
type trend struct {
	// Rising is the forecast growth of the arrival rate over the horizon
	// (req/s, never negative).
	Rising float64
	// Steadily says the arrivals rose along the line over the whole
	// window: the rates stray from it (root mean square) by no more than
	// trendStdErrs standard errors of a Poisson rate over a metrics
	// window. A step strays by about half its height: a burst's onset
	// forecasts growth for a few cycles after it, which is not a line.
	Steadily bool
}

// trendOf fits the line of the remembered arrivals and the current rate
// over the trend's window.
func trendOf(plans []PlanPoint, now time.Time, cur float64, horizon time.Duration) trend {
	window := trendWindow(horizon)
	xs, ys, span := trendPoints(plans, now, cur, window)
	if len(xs) < 3 || span < window/2 {
		return trend{}
	}
	line, ok := fit.Linear(xs, ys)
	if !ok {
		return trend{}
	}
	growth := line.Slope - trendStdErrs*line.SlopeStdErr
	steady := nearLine(xs, ys, line)
	if recent, se, ok := recentSlope(xs, ys); ok {
		if !steady {
			recent -= trendStdErrs * se
		}
		growth = min(growth, recent)
	}
	t := trend{Rising: max(0, growth) * horizon.Seconds()}
	t.Steadily = t.Rising > 0 && span >= window-decision.RateWindow && steady
	return t
}

// nearLine says the points stray from the line (root mean square) by no
// more than trendStdErrs standard errors of a Poisson rate over a metrics
// window at their mean.
func nearLine(xs, ys []float64, line fit.Line) bool {
	var rss float64
	for i, x := range xs {
		d := ys[i] - (line.Intercept + line.Slope*x)
		rss += d * d
	}
	return math.Sqrt(rss/float64(len(xs))) <= trendStdErrs*math.Sqrt(line.MeanY/decision.RateWindow.Seconds())
}

// trendPoints are the arrival rates remembered within window (xs their
// negative ages in seconds, the current rate at 0) and the oldest age.
func trendPoints(plans []PlanPoint, now time.Time, cur float64, window time.Duration) (xs, ys []float64, span time.Duration) {
	xs, ys = []float64{0}, []float64{cur}
	for _, p := range plans {
		if age := now.Sub(p.At); age >= 0 && age <= window && p.Arrivals > 0 {
			xs = append(xs, -age.Seconds())
			ys = append(ys, p.Arrivals)
			span = max(span, age)
		}
	}
	return xs, ys, span
}

// recentSlope is the slope of the points of the last trendRecent (xs are
// negative ages in seconds) and its standard error were the rates only
// the Poisson noise of a metrics window at their mean.
func recentSlope(xs, ys []float64) (slope, stdErr float64, ok bool) {
	var rx, ry []float64
	for i, x := range xs {
		if -x <= trendRecent.Seconds() {
			rx, ry = append(rx, x), append(ry, ys[i])
		}
	}
	if len(rx) < 3 {
		return 0, 0, false
	}
	line, ok := fit.Linear(rx, ry)
	if !ok {
		return 0, 0, false
	}
	return line.Slope, math.Sqrt(line.MeanY / decision.RateWindow.Seconds() / line.Sxx), true
}

// trendWindow is how far back rising looks for a horizon.
func trendWindow(horizon time.Duration) time.Duration {
	return max(trendHorizons*horizon, minTrendWindow)
}

// falling says the arrival rate has fallen steadily over the trend's
// window (at least fallParts rate windows): the mean of each of its
// fallParts parts lower than the older one beside it by more than
// trendStdErrs standard errors of a Poisson rate over a part. A burst's
// end is a step, which leaves level parts on either side of it, and so is
// a staircase of bursts ending one after the other (24, 17 then 5 req/s
// over nine minutes); a day's evening falls through every part.
func falling(plans []PlanPoint, now time.Time, cur float64, horizon time.Duration) bool {
	window := max(trendWindow(horizon), fallParts*decision.RateWindow)
	part := window / fallParts
	xs, ys, _ := trendPoints(plans, now, cur, window)
	var sum [fallParts]float64
	var n [fallParts]int
	oldest := time.Duration(0)
	for i, x := range xs {
		age := time.Duration(-x * float64(time.Second))
		if age >= window {
			continue
		}
		k := int(age / part)
		sum[k] += ys[i]
		n[k]++
		oldest = max(oldest, age)
	}
	if oldest < window-decision.RateWindow {
		return false
	}
	for i := 1; i < fallParts; i++ {
		if n[i] == 0 {
			return false
		}
		newer, older := sum[i-1]/float64(n[i-1]), sum[i]/float64(n[i])
		if older-newer <= trendStdErrs*math.Sqrt(older/part.Seconds()) {
			return false
		}
	}
	return true
}

// fallParts is how many parts falling reads, each at least a rate window
// long, so a step smoothed by the collector's rate over one window spans
// at most two of them.
const fallParts = 6
