package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/sim/trace"
)

// The warm-up plays the trace's first d before the measured part, forward
// or mirrored; the measured part is the whole trace from d on either way.
func TestWithWarmup(t *testing.T) {
	at := func(ds ...time.Duration) *trace.Trace {
		tr := &trace.Trace{Name: "t"}
		for i, d := range ds {
			tr.Requests = append(tr.Requests, trace.Request{Arrival: d, Input: int32(i + 1), Output: 1})
		}
		return tr
	}
	tr := at(0, time.Minute, 3*time.Minute, 12*time.Minute)
	measured := []trace.Request{
		{Arrival: 5 * time.Minute, Input: 1, Output: 1},
		{Arrival: 6 * time.Minute, Input: 2, Output: 1},
		{Arrival: 8 * time.Minute, Input: 3, Output: 1},
		{Arrival: 17 * time.Minute, Input: 4, Output: 1},
	}
	for _, tc := range []struct {
		name     string
		mirrored bool
		warm     []trace.Request
	}{
		{"replayed: the first minutes again, ending at minute 5's rate", false, []trace.Request{
			{Arrival: 0, Input: 1, Output: 1},
			{Arrival: time.Minute, Input: 2, Output: 1},
			{Arrival: 3 * time.Minute, Input: 3, Output: 1},
		}},
		{"mirrored: ending where the measured part starts", true, []trace.Request{
			{Arrival: 2 * time.Minute, Input: 3, Output: 1},
			{Arrival: 4 * time.Minute, Input: 2, Output: 1},
			{Arrival: 5 * time.Minute, Input: 1, Output: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, w := WithWarmup(tr, 5*time.Minute, tc.mirrored)
			assert.Equal(t, Warmup{Origin: 5 * time.Minute, Skip: 3}, w)
			assert.Equal(t, tc.warm, out.Requests[:w.Skip])
			assert.Equal(t, measured, out.Requests[w.Skip:])
		})
	}
	out, w := WithWarmup(tr, 0, true)
	assert.Same(t, tr, out, "no warm-up")
	assert.Zero(t, w)
}
