package decision

import (
	"math"
	"testing"
)

func TestFinite(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want bool
	}{
		{0, true}, {-1, true}, {math.MaxFloat64, true}, {math.SmallestNonzeroFloat64, true},
		{math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		if got := Finite(tc.x); got != tc.want {
			t.Errorf("Finite(%g) = %v, want %v", tc.x, got, tc.want)
		}
	}
}
