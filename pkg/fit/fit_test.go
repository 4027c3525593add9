package fit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLinear(t *testing.T) {
	tests := []struct {
		name   string
		xs, ys []float64
		want   Line
		wantOK bool
	}{
		{name: "exact line: no error", xs: []float64{0, 1, 2, 3}, ys: []float64{1, 3, 5, 7},
			want: Line{Slope: 2, Intercept: 1, SlopeStdErr: 0, MeanY: 4, Sxx: 5}, wantOK: true},
		{name: "two points: slope known, error unknown", xs: []float64{1, 3}, ys: []float64{2, 6},
			want: Line{Slope: 2, Intercept: 0, SlopeStdErr: math.Inf(1), MeanY: 4, Sxx: 2}, wantOK: true},
		// Residuals -1/3, 2/3, -1/3 around y = x + 1/3: rss = 2/3, sxx = 2,
		// stderr = sqrt(rss / (n-2) / sxx) = sqrt(1/3).
		{name: "noisy points", xs: []float64{0, 1, 2}, ys: []float64{0, 2, 2},
			want: Line{Slope: 1, Intercept: 1.0 / 3, SlopeStdErr: math.Sqrt(1.0 / 3), MeanY: 4.0 / 3, Sxx: 2}, wantOK: true},
		{name: "flat x: no slope", xs: []float64{2, 2, 2}, ys: []float64{1, 2, 3}},
		{name: "no points", xs: nil, ys: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Linear(tt.xs, tt.ys)
			assert.Equal(t, tt.wantOK, ok)
			assert.InDelta(t, tt.want.Slope, got.Slope, 1e-12)
			assert.InDelta(t, tt.want.Intercept, got.Intercept, 1e-12)
			assert.InDelta(t, tt.want.MeanY, got.MeanY, 1e-12)
			assert.InDelta(t, tt.want.Sxx, got.Sxx, 1e-12)
			if math.IsInf(tt.want.SlopeStdErr, 1) {
				assert.True(t, math.IsInf(got.SlopeStdErr, 1), "%v", got.SlopeStdErr)
			} else {
				assert.InDelta(t, tt.want.SlopeStdErr, got.SlopeStdErr, 1e-12)
			}
		})
	}
}
