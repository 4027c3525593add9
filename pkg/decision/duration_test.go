package decision

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAddDurations(t *testing.T) {
	const top, bottom = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	cases := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{"small", time.Minute, time.Second, time.Minute + time.Second},
		{"negative", -time.Minute, time.Second, -time.Minute + time.Second},
		{"at the top", top - time.Minute, time.Minute, top},
		{"over the top", top - time.Second, time.Minute, top},
		{"top plus top", top, top, top},
		{"under the bottom", bottom + time.Second, -time.Minute, bottom},
		{"top plus bottom", top, bottom, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, AddDurations(tc.a, tc.b))
			assert.Equal(t, tc.want, AddDurations(tc.b, tc.a))
		})
	}
}

func TestMulDuration(t *testing.T) {
	const top, bottom = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	cases := []struct {
		name string
		d    time.Duration
		n    int64
		want time.Duration
	}{
		{"small", 10 * time.Second, 3, 30 * time.Second},
		{"zero", top, 0, 0},
		{"zero duration", 0, math.MaxInt64, 0},
		{"twice the top", top, 2, top},
		{"int32 x int32 seconds", time.Duration(math.MaxInt32) * time.Second, math.MaxInt32, top},
		{"negative factor", top, -2, bottom},
		{"negative duration", -top, 2, bottom},
		{"both negative", -top, -2, top},
		{"min x -1", bottom, -1, top},
		{"exactly representable", top, 1, top},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MulDuration(tc.d, tc.n))
		})
	}
}
