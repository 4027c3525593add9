package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minutes are plans one a minute up to now (t0 + len(rates) minutes),
// oldest first, with the given arrivals.
func minutes(rates ...float64) []PlanPoint {
	out := make([]PlanPoint, len(rates))
	for i, r := range rates {
		out[i] = PlanPoint{At: t0.Add(time.Duration(i) * time.Minute), Arrivals: r, Rate: r}
	}
	return out
}

func TestLevelOf(t *testing.T) {
	// An hour at 8 req/s with two 10-minute bursts at 16.
	bursty := slices.Concat(slices.Repeat([]float64{8}, 15), slices.Repeat([]float64{16}, 10),
		slices.Repeat([]float64{8}, 15), slices.Repeat([]float64{16}, 10), slices.Repeat([]float64{8}, 11))
	cases := []struct {
		name  string
		rates []float64
		cur   float64
		want  float64
	}{
		{"no history: unknown", nil, 8, 0},
		{"less than the window: unknown", slices.Repeat([]float64{8}, 40), 8, 0},
		{"bursts over a third of the hour leave the level", bursty, 8, 8},
		{"a fall over most of the hour is the level", slices.Concat(slices.Repeat([]float64{8}, 25), slices.Repeat([]float64{4}, 36)), 4, 4},
		{"a fall over less than half of it is not yet", slices.Concat(slices.Repeat([]float64{8}, 35), slices.Repeat([]float64{4}, 26)), 4, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans := minutes(tc.rates...)
			now := t0.Add(time.Duration(len(tc.rates)) * time.Minute)
			assert.InDelta(t, tc.want, levelOf(plans, now, tc.cur), 1e-9)
		})
	}
}

func TestLevelRatio(t *testing.T) {
	for _, tc := range []struct{ then, now, want float64 }{
		{8, 4, 0.5},
		{8, 8, 1},
		{4, 8, 1}, // a risen level: the plan now covers it
		{0, 4, 1}, // made before the level was known
		{8, 0, 1}, // the level unknown now
	} {
		assert.InDelta(t, tc.want, levelRatio(tc.then, tc.now), 1e-12, "%+v", tc)
	}
}

// A burst that came back is held for the full hold, but as the multiple
// of its level it was: once the level has halved, half its plan is held.
func TestHoldFollowsTheLevel(t *testing.T) {
	const burstPlan = 30.0
	state := func(burstLevel float64) State {
		// Ten minutes at 8 req/s, then fifty at 4; the burst's plan 20
		// minutes ago is the highest of the hold.
		plans := minutes(slices.Concat(slices.Repeat([]float64{8}, 10), slices.Repeat([]float64{4}, 50))...)
		plans[40].Rate, plans[40].Level = burstPlan, burstLevel
		now := t0.Add(60 * time.Minute)
		return State{Analyzer: Name, Plans: plans, HoldFactor: holdFactor,
			Rises: []time.Time{now.Add(-30 * time.Minute), now.Add(-20 * time.Minute)}}
	}
	g := fleet(4, 0, 4)
	g.Now = t0.Add(60 * time.Minute)

	an, _, _ := run(t, g, state(0))
	require.InDelta(t, 4, an.Level, 1e-9, "the hour's median")
	assert.InDelta(t, burstPlan, an.Held, 1e-9, "a plan of unknown level is held as made")

	an, _, _ = run(t, g, state(8))
	assert.InDelta(t, burstPlan/2, an.Held, 1e-9, "made at level 8, held at level 4: %+v", an)
	assert.Contains(t, an.Summary()[0], "as a multiple of the level, now 4.000 req/s")
}
