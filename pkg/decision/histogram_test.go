package decision

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHistogramAbove(t *testing.T) {
	inf := math.Inf(1)
	// 10 req/s: 2 at or below 50 ms, 6 at or below 100 ms, 9 at or below
	// 200 ms, one slower.
	h := Histogram{Bounds: []float64{0.05, 0.1, 0.2, inf}, Counts: []float64{2, 6, 9, 10}}
	cases := []struct {
		name string
		h    Histogram
		x    float64
		want float64
	}{
		{"on a bound", h, 0.1, 0.4},
		{"inside a bucket, linear", h, 0.15, 0.25},
		{"inside the first bucket, from 0", h, 0.025, 0.9},
		{"past the last finite bound", h, 0.5, 0.1},
		{"below everything", h, 0, 1},
		{"empty", Histogram{}, 0.1, 0},
		{"nothing observed", Histogram{Bounds: []float64{0.1, inf}, Counts: []float64{0, 0}}, 0.1, 0},
		{"mismatched lengths", Histogram{Bounds: []float64{0.1}, Counts: []float64{1, 2}}, 0.1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, tc.h.Above(tc.x), 1e-9)
		})
	}
	assert.Equal(t, 10.0, h.Total())
}

func TestHistogramMerge(t *testing.T) {
	inf := math.Inf(1)
	a := Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{1, 3, 4}}
	b := Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{0, 1, 4}}
	// Other bounds: 2 at or below 75 ms of 2, read at 50 ms and 100 ms.
	c := Histogram{Bounds: []float64{0.075, inf}, Counts: []float64{2, 2}}
	cases := []struct {
		name string
		a, b Histogram
		want Histogram
	}{
		{"same bounds add bucket by bucket", a, b, Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{1, 4, 8}}},
		{"into nothing copies", Histogram{}, a, a},
		{"nothing into it keeps it", a, Histogram{}, a},
		{"other bounds are read by interpolation", a, c, Histogram{Bounds: []float64{0.05, 0.1, inf}, Counts: []float64{1 + 2.0*2/3, 5, 6}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.Merge(tc.b)
			assert.Equal(t, tc.want.Bounds, got.Bounds)
			assert.InDeltaSlice(t, tc.want.Counts, got.Counts, 1e-9)
		})
	}
	// Merging never writes into its inputs.
	assert.Equal(t, []float64{1, 3, 4}, a.Counts)
}
