package decision

import (
	"math"
	"sort"
)

// Histogram is a Prometheus histogram's rate over a window: the cumulative
// count (per second) of observations at or below each upper bound,
// ascending, the last bound +Inf. The zero value holds nothing.
type Histogram struct {
	Bounds []float64 `json:"le,omitempty"`
	Counts []float64 `json:"counts,omitempty"`
}

// Total is the rate of all observations.
func (h Histogram) Total() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Above is the share of observations above x, interpolating linearly
// inside the bucket that holds x as histogram_quantile does (the first
// bucket starts at 0). 0 when the histogram holds nothing.
func (h Histogram) Above(x float64) float64 {
	total := h.Total()
	if total <= 0 || len(h.Bounds) != len(h.Counts) {
		return 0
	}
	i := sort.SearchFloat64s(h.Bounds, x) // first bound >= x
	if i >= len(h.Bounds) || math.IsInf(h.Bounds[i], 1) {
		// Above the last finite bound: only what the +Inf bucket adds
		// beyond it is known to be above.
		if i > 0 {
			return Clamp01(1 - h.Counts[i-1]/total)
		}
		return 0
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	at := below
	if w := h.Bounds[i] - lo; w > 0 {
		at += (h.Counts[i] - below) * (x - lo) / w
	}
	return Clamp01(1 - at/total)
}

// Merge adds o's rates to h bucket by bucket. Histograms with different
// bounds keep h's bounds and read o at them by interpolation.
func (h Histogram) Merge(o Histogram) Histogram {
	switch {
	case o.Total() <= 0 || len(o.Bounds) != len(o.Counts):
		return h
	case h.Total() <= 0 && len(h.Counts) == 0:
		return Histogram{Bounds: append([]float64(nil), o.Bounds...), Counts: append([]float64(nil), o.Counts...)}
	}
	out := Histogram{Bounds: append([]float64(nil), h.Bounds...), Counts: append([]float64(nil), h.Counts...)}
	for i, b := range out.Bounds {
		if math.IsInf(b, 1) {
			out.Counts[i] += o.Total()
			continue
		}
		out.Counts[i] += o.Total() * (1 - o.Above(b))
	}
	return out
}
