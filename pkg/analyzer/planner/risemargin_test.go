package planner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// minutely is one plan point a minute at each of rates' 1m arrival
// rates, the last a minute before now.
func minutely(now time.Time, rates ...float64) []PlanPoint {
	var ps []PlanPoint
	for i, r := range rates {
		ps = append(ps, PlanPoint{At: now.Add(-time.Duration(len(rates)-i) * time.Minute), Arrivals: r})
	}
	return ps
}

func TestRiseHistoryRecord(t *testing.T) {
	const horizon = 4 * time.Minute
	now := t0.Add(time.Hour)
	points := func(rates ...float64) []PlanPoint { return minutely(now, rates...) }
	noise := func(start float64) float64 { return riseNoiseSigmas * math.Sqrt(start/60) }
	// Requests lasting three minutes: a rise counts as the mean of three
	// 1m rates.
	const span = 3 * time.Minute
	noise3 := func(start float64) float64 { return riseNoiseSigmas * math.Sqrt(start/180) }
	cases := []struct {
		name  string
		plans []PlanPoint
		cur   float64
		span  time.Duration
		// bin is where the rise lands; -1 when nothing is recorded.
		bin int
	}{
		{"flat", points(4, 4, 4, 4, 4), 4, 0, 0},
		{"within the rate window's noise", points(4, 4, 4.2, 4.4, 4.3), 4.4, 0, 0},
		{"a step to 3x within the delay", points(1, 2, 2, 6, 6), 6, 0, int((4 - noise(2)) / 2 / riseBin)},
		{"the peak counts, not the last rate", points(2, 2, 8, 3, 2), 2, 0, int((6 - noise(2)) / 2 / riseBin)},
		{"a fall is no rise", points(6, 6, 3, 2, 2), 2, 0, 0},
		{"beyond 4x: the last bin", points(5, 1, 1, 20, 20), 20, 0, riseBins - 1},
		{"no point a whole delay old", points(2, 2, 2), 2, 0, -1},
		{"from an idle group", points(0, 0, 0, 0, 3), 3, 0, -1},
		{"a one-minute burst among long requests adds a third of its height", points(2, 2, 2, 2, 8, 2), 2, span, int((2 - noise3(2)) / 2 / riseBin)},
		{"a lasting step among long requests counts whole", points(2, 2, 2, 2, 8, 8), 8, span, int((6 - noise3(2)) / 2 / riseBin)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := RiseHistory{}.record(tc.plans, now, tc.cur, horizon, tc.span)
			if tc.bin < 0 {
				assert.Empty(t, h.Bins)
				return
			}
			require.Len(t, h.Bins, riseBins)
			assert.Equal(t, 1.0, h.Bins[tc.bin], "bins %v", h.Bins)
			assert.Equal(t, now, h.Since)
		})
	}
}

func TestRiseHistoryForgets(t *testing.T) {
	plans := []PlanPoint{{At: t0, Arrivals: 4}}
	h := RiseHistory{}.record(plans, t0.Add(5*time.Minute), 4, 4*time.Minute, 0)
	later := t0.Add(5*time.Minute + riseHalfLife)
	plans = []PlanPoint{{At: later.Add(-5 * time.Minute), Arrivals: 4}}
	h = h.record(plans, later, 4, 4*time.Minute, 0)
	assert.InDelta(t, 1.5, h.Bins[0], 1e-9, "the first rise counts half after a half-life")
	assert.Equal(t, t0.Add(5*time.Minute), h.Since)
}

func TestRiseMargin(t *testing.T) {
	history := func(span time.Duration, weights map[int]float64) RiseHistory {
		h := RiseHistory{Bins: make([]float64, riseBins), Since: t0, At: t0.Add(span)}
		for i, w := range weights {
			h.Bins[i] = w
		}
		return h
	}
	cases := []struct {
		name       string
		h          RiseHistory
		attainment float64
		want       float64
	}{
		{"no history", RiseHistory{}, 0.99, 0},
		{"an hour of history is too little", history(time.Hour, map[int]float64{20: 100}), 0.99, 0},
		{"smooth: nine in ten delays within the noise", history(3*time.Hour, map[int]float64{0: 90, 20: 10}), 0.99, 0},
		{"bursts in 15% of delays: their size", history(3*time.Hour, map[int]float64{0: 85, 20: 15}), 0.99, 21 * riseBin},
		{"a lower target covers fewer", history(3*time.Hour, map[int]float64{0: 85, 20: 15}), 0.98, 0},
		{"the rises below the cover set it", history(3*time.Hour, map[int]float64{0: 50, 4: 45, 20: 5}), 0.99, 5 * riseBin},
		{"a target the budget cannot cover", history(3*time.Hour, map[int]float64{0: 50, 20: 50}), 0.8, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, tc.h.margin(tc.attainment), 1e-9)
		})
	}
}

// A group whose history has bursts within a start-up delay plans for the
// usual one at the rate between bursts; the same rate after a smooth
// history, or after too short a history, plans none.
func TestRiseMarginPlansForUsualBursts(t *testing.T) {
	// over is the share of requests over the ITL target.
	playOver := func(minutes int, bursty bool, over float64) Analysis {
		var st any
		var an Analysis
		l4 := int32(2)
		for m := range minutes {
			rate := 2.0
			if bursty && m%15 >= 12 {
				// A 3x burst for the last three minutes of each quarter
				// hour.
				rate = 6
			}
			g := fleet(l4, 0, rate)
			g.Variants[1].MaxReplicas = 0
			g.Now = t0.Add(time.Duration(m) * time.Minute)
			for i := range g.Replicas {
				g.Replicas[i].TPOT = tpot(g.Replicas[i].ArrivalRate, over)
			}
			var sig decision.Signal
			an, sig, st = run(t, g, st)
			l4 = sig.PlannedReplicas["l4"]
		}
		return an
	}
	play := func(minutes int, bursty bool) Analysis { return playOver(minutes, bursty, 0) }
	// Each ends five minutes into a lull.
	bursty, smooth, young := play(185, true), play(185, false), play(95, true)
	assert.Equal(t, 2.0, bursty.ArrivalRate)
	assert.InDelta(t, 2*(4-riseNoiseSigmas*math.Sqrt(2.0/60))/2, bursty.RiseMargin, 2*riseBin+1e-9, "the usual burst's rise at the rate now")
	assert.Zero(t, smooth.RiseMargin)
	// Too young for the histogram, the recent delays' rise is planned,
	// not held.
	assert.Positive(t, young.RiseMargin)
	assert.Greater(t, young.Staffed, young.StaffedArrivals)
	assert.Greater(t, bursty.StaffedArrivals, smooth.StaffedArrivals)

	// In a burst's first minute the usual rise is a share of the level
	// the bursts rise from, not of the peak: the rises recorded are the
	// bursts'.
	peak := play(178, true)
	assert.Equal(t, 6.0, peak.ArrivalRate)
	assert.False(t, peak.BudgetSpent)
	assert.InDelta(t, bursty.RiseMargin, peak.RiseMargin, 2*riseBin+1e-9, "the usual burst's rise over the level (2 req/s)")
	// Once the error budget is spent (3% of requests over the ITL
	// target), every rise is planned from the rate now.
	spent := playOver(178, true, 0.03)
	require.True(t, spent.BudgetSpent)
	assert.InDelta(t, 3*bursty.RiseMargin, spent.RiseMargin, 6*riseBin+1e-9, "the usual burst's rise over the peak (6 req/s)")
}

func TestRiseBase(t *testing.T) {
	const horizon = 4 * time.Minute
	now := t0.Add(time.Hour)
	series := func(rates ...float64) []PlanPoint { return minutely(now, rates...) }
	for _, tc := range []struct {
		name              string
		plans             []PlanPoint
		load, level, want float64
	}{
		{"level unknown: the load", series(2, 2, 6, 6), 6, 0, 6},
		{"at a burst's peak, the level left two minutes ago: the level", series(2, 2, 2, 6, 6), 6, 2, 2},
		{"over the level for longer than a start-up: the load", series(2, 5, 5, 5, 6, 6), 6, 2, 6},
		{"in a lull under the level: the load", series(2, 2, 1), 1, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, riseBase(tc.plans, now, tc.load, tc.level, horizon))
		})
	}
}

func TestRecentRise(t *testing.T) {
	const horizon = 4 * time.Minute
	now := t0.Add(time.Hour)
	// minutes of 1m rates, the last a minute before now.
	series := func(n int, rate func(m int) float64) []PlanPoint {
		var ps []PlanPoint
		for m := range n {
			ps = append(ps, PlanPoint{At: now.Add(-time.Duration(n-m) * time.Minute), Arrivals: rate(m)})
		}
		return ps
	}
	flat := func(int) float64 { return 20 }
	// Bursts from 6 to 27 req/s: five minutes of every fifteen.
	bursty := func(m int) float64 {
		if m%15 >= 10 {
			return 27
		}
		return 6
	}
	// A steady climb of 2% a minute: a delay rises by 8.2%, less the
	// rate window's noise (about 2% at 100 req/s).
	climb := func(m int) float64 { return 100 * math.Pow(1.02, float64(m)) }
	noise := func(start float64) float64 { return riseNoiseSigmas * math.Sqrt(start/60) }
	cases := []struct {
		name  string
		plans []PlanPoint
		load  float64
		want  float64
		delta float64
	}{
		{"flat", series(40, flat), 20, 0, 0},
		{"too few delays near the rate now", series(12, flat), 20, 0, 0},
		{"at a burst's peak: the rises from the lulls do not count", series(45, bursty), 27, 0, 0},
		{"in a lull: the rise to the burst", series(45, bursty), 6, (27 - 6 - noise(6)) / 6, 1e-9},
		{"climbing: the climb over a start-up delay", series(40, climb), climb(39), 0.065, 0.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := tc.plans[len(tc.plans)-1].Arrivals
			got := recentRise(tc.plans, now, cur, tc.load, horizon, 0, 0.99)
			assert.InDelta(t, tc.want, got, tc.delta+1e-9)
		})
	}
}

// A group too young for the histogram plans the rises of the delays it
// remembers near its rate, whether or not it misses its SLO, and does not
// hold them; one whose rises are burst onsets (the hold's) plans none.
func TestYoungGroupPlansItsRecentRises(t *testing.T) {
	play := func(peak, over float64) Analysis {
		var st any
		var an Analysis
		l4 := int32(2)
		for m := range 95 {
			rate := 2.0
			if m%15 >= 12 {
				// The last three minutes of each quarter hour.
				rate = peak
			}
			g := fleet(l4, 0, rate)
			g.Variants[1].MaxReplicas = 0
			g.Now = t0.Add(time.Duration(m) * time.Minute)
			for i := range g.Replicas {
				g.Replicas[i].TPOT = tpot(g.Replicas[i].ArrivalRate, over)
			}
			var sig decision.Signal
			an, sig, st = run(t, g, st)
			l4 = sig.PlannedReplicas["l4"]
		}
		return an
	}
	// Each ends five minutes into a lull at 2 req/s; 3% of requests over
	// the ITL target is three times the error budget.
	missing, meeting, onsets := play(3, 0.03), play(3, 0), play(6, 0.03)
	require.Equal(t, 2.0, missing.ArrivalRate)
	// A third of the lull's delays rise to 3 req/s: the 90th percentile
	// is that rise, less the 1m window's noise.
	assert.InDelta(t, 1-riseNoiseSigmas*math.Sqrt(2.0/60), missing.RiseMargin, 1e-9)
	assert.Greater(t, missing.Staffed, missing.StaffedArrivals+missing.RiseMargin/2, "planned now, not held")
	assert.False(t, meeting.BudgetSpent)
	assert.InDelta(t, missing.RiseMargin, meeting.RiseMargin, 1e-9, "the budget does not gate the evidence")
	assert.Zero(t, onsets.RiseMargin)
}
