package planner

import (
	"math"
	"time"
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
const (
	trendHorizons  = 3
	trendStdErrs   = 2
	minTrendWindow = 5 * time.Minute
)

// rising is the forecast growth of the arrival rate over the horizon
// (req/s, never negative) from the remembered arrivals and the current
// rate.
func rising(plans []PlanPoint, now time.Time, cur float64, horizon time.Duration) float64 {
	window := max(trendHorizons*horizon, minTrendWindow)
	xs, ys := []float64{0}, []float64{cur}
	span := time.Duration(0)
	for _, p := range plans {
		if age := now.Sub(p.At); age <= window && p.Arrivals > 0 {
			xs = append(xs, -age.Seconds())
			ys = append(ys, p.Arrivals)
			span = max(span, age)
		}
	}
	if len(xs) < 3 || span < window/2 {
		return 0
	}
	slope, stdErr := fitLine(xs, ys)
	return max(0, slope-trendStdErrs*stdErr) * horizon.Seconds()
}

// fitLine is the least-squares slope of y on x and its standard error.
func fitLine(xs, ys []float64) (slope, stdErr float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx <= 0 {
		return 0, math.Inf(1)
	}
	slope = sxy / sxx
	var rss float64
	for i := range xs {
		e := ys[i] - my - slope*(xs[i]-mx)
		rss += e * e
	}
	if n <= 2 {
		return slope, math.Inf(1)
	}
	return slope, math.Sqrt(rss / (n - 2) / sxx)
}
