package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTrendOf: the forecast growth is what the window shows clearly and
// is still under way, not a step already taken or a ramp that levelled
// off; only growth along a line over the whole window is steady (a ramp
// whose forecast is held for a start-up), not a burst's step.
func TestTrendOf(t *testing.T) {
	const horizon = 4 * time.Minute
	cases := []struct {
		name     string
		span     time.Duration
		rate     func(age time.Duration) float64
		min, max float64
		steadily bool
	}{
		{"ramp of 0.6 req/s per minute", 12 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() }, 2.39, 2.41, true},
		{"noisy ramp", 12 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() + rateNoise(a) }, 1.2, 2.6, true},
		{"noisy ramp of 0.35 req/s a minute", 13 * time.Minute, func(a time.Duration) float64 { return 20 - 0.35*a.Minutes() + rateNoise(a) }, 0.5, 1.4, true},
		{"noisy plateau", 12 * time.Minute, func(a time.Duration) float64 { return 5 + rateNoise(a) }, 0, 0, false},
		{"falling", 12 * time.Minute, func(a time.Duration) float64 { return 2 + 0.01*a.Seconds() }, 0, 0, false},
		{"step 2 -> 8 five minutes ago", 12 * time.Minute, func(a time.Duration) float64 {
			if a > 5*time.Minute {
				return 2 + rateNoise(a)/3
			}
			return 8 + rateNoise(a)
		}, 0, 0.5, false},
		{"step 6 -> 27 five minutes ago", 13 * time.Minute, func(a time.Duration) float64 {
			if a > 5*time.Minute {
				return 6 + rateNoise(a)/3
			}
			return 27 + rateNoise(a)
		}, 0, 3, false},
		{"step 6 -> 26 four minutes ago, six minutes of history", 6 * time.Minute, func(a time.Duration) float64 {
			if a > 4*time.Minute {
				return 6 + rateNoise(a)/3
			}
			return 26 + rateNoise(a)
		}, 0, 0.5, false}, // the window's line alone: 8.6
		{"step 6 -> 25 three minutes ago, its plateau's last two minutes up by noise", 13 * time.Minute, func(a time.Duration) float64 {
			// The bursty hour's minutes 50-53 (`wva simulate --explain`).
			plateau := map[time.Duration]float64{0: 25.72, 30 * time.Second: 25.35, time.Minute: 25.33, 90 * time.Second: 25.72, 2 * time.Minute: 24.65, 150 * time.Second: 24.07, 3 * time.Minute: 15.97}
			if r, ok := plateau[a]; ok {
				return r
			}
			return 6 + rateNoise(a)/3
		}, 0, 0, false}, // the last two minutes' line alone: 1.4
		{"ramp that levelled off two minutes ago", 12 * time.Minute, func(a time.Duration) float64 {
			return 9 - 0.01*max(a-2*time.Minute, 0).Seconds() + rateNoise(a)/3
		}, 0, 0.5, true}, // the little left is still along the line
		{"ramp seen for less than the window", 8 * time.Minute, func(a time.Duration) float64 { return 20 - 0.35*a.Minutes() }, 1.3, 1.41, false},
		{"history shorter than half the window", 5 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() }, 0, 0, false},
	}
	// A 30s start-up: a step from idle seen through the 1m rate window is a
	// one-minute ramp, which the five-minute minimum window does not
	// extrapolate.
	ramp, cur := arrivalSeries(time.Minute, func(a time.Duration) float64 { return 1 - a.Seconds()/60 })
	assert.Zero(t, trendOf(ramp, t0, cur, 30*time.Second).Rising, "a step through the rate window")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, cur := arrivalSeries(tc.span, tc.rate)
			got := trendOf(ps, t0, cur, horizon)
			assert.GreaterOrEqual(t, got.Rising, tc.min)
			assert.LessOrEqual(t, got.Rising, tc.max)
			assert.Equal(t, tc.steadily, got.Steadily)
		})
	}
}

// arrivalSeries is the plans of the last span, one every 30 s, with the
// arrival rate f(age), and the current rate f(0).
func arrivalSeries(span time.Duration, f func(age time.Duration) float64) ([]PlanPoint, float64) {
	var ps []PlanPoint
	for age := span; age > 0; age -= 30 * time.Second {
		ps = append(ps, PlanPoint{At: t0.Add(-age), Arrivals: f(age)})
	}
	return ps, f(0)
}

// rateNoise is a fixed pattern of noise on a measured rate, by age.
func rateNoise(age time.Duration) float64 {
	return []float64{-0.3, 0.2, 0.4, -0.1, -0.4, 0.1}[int(age/(30*time.Second))%6]
}

// TestFallingIsASlopeNotAStep: a fall through every part of the window is
// a curve going down; a burst's end, or bursts ending one after the
// other, leave level parts and are lulls.
func TestFallingIsASlopeNotAStep(t *testing.T) {
	// smeared is a step from before to after at age at, seen through the
	// collector's one-minute rate.
	smeared := func(age, at time.Duration, before, after float64) float64 {
		x := min(max((age-at).Seconds()/60+0.5, 0), 1)
		return after + (before-after)*x
	}
	cases := []struct {
		name    string
		horizon time.Duration
		span    time.Duration
		rate    func(age time.Duration) float64
		want    bool
	}{
		{"a day's evening: 1 req/s less a minute", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 15 + a.Minutes() + rateNoise(a) }, true},
		{"a slow evening within the noise", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 5 + 0.05*a.Minutes() + rateNoise(a) }, false},
		{"a burst's end three minutes ago", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return smeared(a, 3*time.Minute, 24, 5) + rateNoise(a) }, false},
		{"bursts ending one after the other: 24, 17, 5 req/s", 30 * time.Second, 10 * time.Minute, func(a time.Duration) float64 {
			return smeared(a, 3*time.Minute, 17, 5) + smeared(a, 6*time.Minute, 7, 0) + rateNoise(a)
		}, false},
		{"a plateau", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 20 + rateNoise(a) }, false},
		{"a rise", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 30 - a.Minutes() + rateNoise(a) }, false},
		{"an evening seen for less than the window", 4 * time.Minute, 8 * time.Minute, func(a time.Duration) float64 { return 15 + a.Minutes() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, cur := arrivalSeries(tc.span, tc.rate)
			assert.Equal(t, tc.want, falling(ps, t0, cur, tc.horizon))
		})
	}
}
