package scenario

import (
	"math"
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
	// A day: the afternoon is busier than the night, and bursts lift some
	// ten-minute windows well above the smooth curve of their hour.
	day := Synthetic{Shape: ShapeDay, Duration: params.Duration(24 * time.Hour), BaseRate: 1, PeakRate: 4, InputTokens: 500, OutputTokens: 100}
	tr, err := day.Generate(3)
	require.NoError(t, err)
	perTen := make([]float64, 24*6)
	for _, r := range tr.Requests {
		perTen[int(r.Arrival/(10*time.Minute))]++
	}
	hourOf := func(h int) float64 { return sum(perTen[6*h : 6*h+6]) }
	assert.Greater(t, hourOf(16), 3*hourOf(4), "16:00 against 04:00")
	smooth := func(i int) float64 { // the curve without bursts, requests per ten minutes
		h := (float64(i) + 0.5) / 6
		return 600 * (1 + 3*(1-math.Cos(2*math.Pi*(h-4)/24))/2)
	}
	bursts := 0
	for i, n := range perTen {
		if n > 1.25*smooth(i) {
			bursts++
		}
	}
	assert.GreaterOrEqual(t, bursts, 10, "ten-minute windows lifted by a burst")
	assert.Less(t, bursts, 72, "bursts are the exception")

	// Workdays: every day rises at 09:00 within a quarter hour and falls
	// back by 19:00, whatever its bursts.
	workdays := Synthetic{Shape: ShapeWorkday, Duration: params.Duration(48 * time.Hour), BaseRate: 1, PeakRate: 4.5, InputTokens: 500, OutputTokens: 100}
	tr, err = workdays.Generate(3)
	require.NoError(t, err)
	perQuarter := make([]float64, 48*4)
	for _, r := range tr.Requests {
		perQuarter[int(r.Arrival/(15*time.Minute))]++
	}
	for day := range 2 {
		q := func(h float64) float64 { return perQuarter[day*96+int(h*4)] }
		assert.Less(t, q(8.75), 2.2*900, "day %d, 08:45-09:00: the night's rate with its bursts", day)
		assert.Greater(t, q(9.5), 2*q(8.75), "day %d, 09:30 against 08:45", day)
		assert.Greater(t, q(12.5), q(19.5), "day %d, lunch against the evening", day)
		assert.Less(t, q(19.5), 2.2*900, "day %d, 19:30", day)
	}

	// A week: Monday to Friday rise at 09:00, Saturday and Sunday hold
	// the night's rate, and the next Monday rises again.
	week := Synthetic{Shape: ShapeWeek, Duration: params.Duration(8 * 24 * time.Hour), BaseRate: 0.2, PeakRate: 1, InputTokens: 500, OutputTokens: 100}
	tr, err = week.Generate(3)
	require.NoError(t, err)
	perHour := make([]float64, 8*24)
	for _, r := range tr.Requests {
		perHour[int(r.Arrival/time.Hour)]++
	}
	for day := range 8 {
		h := func(hour int) float64 { return perHour[day*24+hour] }
		if day == 5 || day == 6 {
			assert.Less(t, h(10), 2.2*720, "day %d (weekend), 10:00: the night's rate with its bursts", day)
			continue
		}
		assert.Greater(t, h(10), 2*h(7), "day %d (workday), 10:00 against 07:00", day)
	}
	// Its bound on the requests drawn counts the workdays' hours and the
	// quiet weekend: nine days at 0.25-1.5 req/s are within it, where the
	// workday's bound (the mean of base and peak) refuses them.
	require.NoError(t, Synthetic{Shape: ShapeWeek, Duration: params.Duration(9 * 24 * time.Hour), BaseRate: 0.25, PeakRate: 1.5, InputTokens: 500, OutputTokens: 100}.Validate())
	assert.Error(t, Synthetic{Shape: ShapeWorkday, Duration: params.Duration(9 * 24 * time.Hour), BaseRate: 0.25, PeakRate: 1.5, InputTokens: 500, OutputTokens: 100}.Validate())

	_, err = Synthetic{Shape: "square", Duration: params.Duration(time.Minute), InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, `traffic.synthetic.shape "square"`)
	_, err = Synthetic{Shape: ShapeRamp, Duration: params.Duration(time.Minute), BaseRate: 2, PeakRate: 1, InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, "traffic.synthetic.peakRate: 1 req/s is outside [2 req/s, 100000 req/s]")
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}
