// Package fit fits a straight line by least squares: the planner's demand
// trend and the simulator's ITL model share it.
package fit

import "math"

// Line is y = Slope*x + Intercept, with the standard error of the slope
// (+Inf when fewer than three points leave no residual degrees of freedom).
// MeanY and Sxx (the sum of the xs' squared deviations from their mean)
// let a caller judge the slope against a noise model of its own.
type Line struct {
	Slope, Intercept, SlopeStdErr float64
	MeanY, Sxx                    float64
}

// Linear fits ys on xs (same length) by ordinary least squares, on
// centred values for numerical stability. ok is false when the xs do not
// vary (fewer than two distinct values): no slope is defined.
func Linear(xs, ys []float64) (l Line, ok bool) {
	n := float64(len(xs))
	if n == 0 {
		return Line{}, false
	}
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
		return Line{}, false
	}
	l.Slope = sxy / sxx
	l.Intercept = my - l.Slope*mx
	l.MeanY, l.Sxx = my, sxx
	if n <= 2 {
		l.SlopeStdErr = math.Inf(1)
		return l, true
	}
	var rss float64
	for i := range xs {
		e := ys[i] - my - l.Slope*(xs[i]-mx)
		rss += e * e
	}
	l.SlopeStdErr = math.Sqrt(rss / (n - 2) / sxx)
	return l, true
}
