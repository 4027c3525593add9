package decision

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{3}, 3},
		{"odd count, unsorted", []float64{9, 1, 4}, 4},
		{"even count: the middle two's mean", []float64{8, 2, 4, 6}, 5},
		{"a burst of outliers leaves it", []float64{8, 8, 8, 16, 16}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.xs...)
			assert.InDelta(t, tc.want, Median(tc.xs), 1e-12)
			assert.Equal(t, in, tc.xs, "the input is not reordered")
		})
	}
}
