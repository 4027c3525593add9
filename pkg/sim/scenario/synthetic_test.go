package scenario

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
)

func TestSyntheticShapes(t *testing.T) {
	for _, shape := range Shapes {
		t.Run(shape, func(t *testing.T) {
			s := Synthetic{Shape: shape, Duration: params.Duration(30 * time.Minute), BaseRate: 1, PeakRate: 4, InputTokens: 500, OutputTokens: 100}
			tr, err := s.Generate(7)
			require.NoError(t, err)
			again, _ := s.Generate(7)
			assert.Equal(t, tr.Requests, again.Requests)
			st := tr.Stats()
			assert.Greater(t, st.Requests, 1000)
			assert.InDelta(t, 500, st.MeanInputTokens, 75)
			assert.InDelta(t, 100, st.MeanOutputTokens, 15)
			assert.LessOrEqual(t, st.Duration, 30*time.Minute)
			perMinute := map[int]int{}
			for _, r := range tr.Requests {
				perMinute[int(r.Arrival/time.Minute)]++
			}
			switch shape {
			case ShapeSteady:
				assert.InDelta(t, 60, float64(perMinute[15]), 30)
			case ShapeRamp:
				assert.Greater(t, perMinute[28]+perMinute[29], 2*(perMinute[0]+perMinute[1]))
			case ShapeSpike:
				// Default spike: minutes 10 to 15.
				assert.Greater(t, perMinute[12], 2*perMinute[5])
				assert.Greater(t, perMinute[12], 2*perMinute[20])
			case ShapeDiurnal:
				assert.Greater(t, perMinute[15], 2*perMinute[0])
			}
		})
	}
	_, err := Synthetic{Shape: "square", Duration: params.Duration(time.Minute), InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, `traffic.synthetic.shape "square"`)
	_, err = Synthetic{Shape: ShapeRamp, Duration: params.Duration(time.Minute), BaseRate: 2, PeakRate: 1, InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, "traffic.synthetic.peakRate: 1 req/s is outside [2 req/s, 100000 req/s]")
}
