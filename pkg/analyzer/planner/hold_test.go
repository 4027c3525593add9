package planner

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// A lull keeps a burst's replicas for the hold: three start-up delays
// after a first burst (nothing says it comes back), twelve or the learned
// hold once a burst has come back within twelve, or while the group is
// too young to have shown whether its bursts come back; past it they are
// released. A start-up shorter than the 1-minute metrics window counts as
// the window.
func TestHoldThroughShortLulls(t *testing.T) {
	type segment struct {
		minutes int
		rate    float64
	}
	const startup = 3 * time.Minute
	cases := []struct {
		name    string
		startup time.Duration
		young   bool
		// learned is the hold factor the group starts with (0: the first).
		learned  float64
		segments []segment
		// held is how long after the last burst minute the burst's
		// replicas are kept at least, released how long at most.
		held, released time.Duration
	}{
		{"a first burst: three start-ups", startup, false, 0, []segment{{10, 1}, {5, 12}}, 3 * startup, 3*startup + 2*time.Minute},
		// The burst comes back within the hold: the second one's
		// replicas are kept for the full hold.
		{"a burst that came back: twelve start-ups or more", startup, false, 0, []segment{{10, 1}, {5, 12}, {5, 1}, {5, 12}}, 12 * startup, 24*startup + 2*time.Minute},
		// Bursts 50 minutes apart came back within the learned hold (32
		// start-ups, 96 minutes) but not within the first (36 minutes).
		{"bursts past the first hold apart: three start-ups", startup, false, maxHoldFactor, []segment{{10, 1}, {5, 12}, {45, 1}, {5, 12}}, 3 * startup, 3*startup + 2*time.Minute},
		{"a 30 s start-up: three metrics windows", 30 * time.Second, false, 0, []segment{{10, 1}, {5, 12}}, 3 * time.Minute, 5 * time.Minute},
		// Less than minRiseHistory of rises: the first burst's lull
		// keeps the full hold.
		{"a young group's first burst: twelve start-ups", startup, true, 0, []segment{{10, 1}, {5, 12}}, 12 * startup, 12*startup + 2*time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &minuteFleet{t: t, startup: tc.startup, l4: 2}
			if !tc.young {
				st := seasoned()
				st.HoldFactor = tc.learned
				f.st = st
			}
			for _, s := range tc.segments {
				for range s.minutes {
					f.cycle(s.rate, 0)
				}
			}
			lastBurst := f.at - time.Minute
			// The first lull cycle keeps what the burst's plan needs.
			burst := f.cycle(1, 0).PlannedReplicas["l4"]
			require.Greater(t, burst, int32(2), "the burst orders replicas")
			for f.at-lastBurst < tc.held {
				sig := f.cycle(1, 0)
				require.Equal(t, burst, sig.PlannedReplicas["l4"], "%s after the burst, within the hold: %s", f.at-time.Minute-lastBurst, sig.Reason)
			}
			for f.at-lastBurst <= tc.released {
				f.cycle(1, 0)
			}
			assert.Less(t, f.l4, burst, "past the hold the burst's replicas are released")
		})
	}
}

// TestEveningIsNotHeld: on a curve going down with no burst in memory,
// what is given back is not needed within a start-up, so the fleet
// follows the fall a start-up behind, not a short hold (three start-ups)
// behind.
func TestEveningIsNotHeld(t *testing.T) {
	const startup = 3 * time.Minute
	curve := &minuteFleet{t: t, startup: startup, l4: 2}
	for m := range 25 {
		curve.cycle(2+float64(m), 0) // 2 -> 26 req/s, 1 req/s a minute
	}
	peak := curve.l4
	for m := range 14 {
		curve.cycle(26-float64(m+1), 0) // back to 12 req/s
	}
	// What the fall's rate a start-up and a cycle ago plans when steady.
	steady := &minuteFleet{t: t, startup: startup, l4: curve.l4}
	for range 20 {
		steady.cycle(12+float64(startup/time.Minute)+1, 0)
	}
	assert.LessOrEqual(t, curve.l4, steady.l4, "the fall is followed a start-up behind")
	assert.Less(t, curve.l4, peak, "the peak's replicas are given back")
}

// TestRampForecastHeldOneStartup: a ramp's forecast (the plan with the
// trend's growth) is held for one start-up, so a release does not give back
// what the forecast of a cycle ago needed; older, it no longer holds.
func TestRampForecastHeldOneStartup(t *testing.T) {
	const forecast = 30.0
	g := fleet(4, 0, 4)
	g.Now = t0.Add(60 * time.Minute)
	for _, tc := range []struct {
		name string
		age  time.Duration
		held bool
	}{
		{"a cycle ago", time.Minute, true},
		{"two start-ups ago, within the hold", 4 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans := minutes(slices.Repeat([]float64{4}, 60)...)
			plans[60-int(tc.age/time.Minute)].Forecast = forecast
			an, _, _ := run(t, g, State{Analyzer: Name, Plans: plans, HoldFactor: holdFactor})
			if tc.held {
				assert.InDelta(t, forecast, an.Held, 1e-9)
			} else {
				assert.Less(t, an.Held, forecast/2)
			}
		})
	}
}

// On a line, the held plan keeps the forecast two start-ups ahead (the
// start-up until what is given back is needed again plus the one to get it
// back), more than the plan, which looks one start-up ahead.
func TestSteadyRiseHoldsTwoStartupsAhead(t *testing.T) {
	a, st := playRamp(t, nil, 0)
	require.Positive(t, a.Rising, "the ramp is forecast")
	var next State
	require.NoError(t, json.Unmarshal(st.(json.RawMessage), &next))
	forecast := next.Plans[len(next.Plans)-1].Forecast
	assert.Greater(t, forecast, a.Staffed, "the forecast looks further ahead than the plan")
	assert.GreaterOrEqual(t, a.Held, forecast, "the held plan keeps it")
}

// playRamp runs the planner every 30 s for ten minutes on an l4-only group
// whose arrivals rise from 2 req/s by 0.02 req/s each second, from st;
// startup, when set, is the L4's start-up delay.
func playRamp(t *testing.T, st any, startup time.Duration) (Analysis, any) {
	t.Helper()
	var a Analysis
	for i := range 20 {
		g := fleet(8, 0, 2+0.02*float64(i*30))
		g.Variants[1].MaxReplicas = 0
		if startup > 0 {
			g.Variants[0].StartupDelay = startup
		}
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		a, _, st = run(t, g, st)
	}
	return a, st
}

// A drained backlog is not held: once the replicas ordered for it serve
// and the queue is gone, the plan is the one the arrivals alone ask for.
func TestHoldForgetsDrainedBacklog(t *testing.T) {
	cycle := func(prev any, at time.Duration, l4 int32, backlog float64) (Analysis, decision.Signal, any) {
		g := fleet(l4, 0, 4)
		g.Now = t0.Add(at)
		g.SchedulerQueueSize = backlog
		return run(t, g, prev)
	}
	_, _, calm := cycle(nil, 0, 2, 0)
	want, wantSig, _ := cycle(calm, 10*time.Minute, 2, 0)

	_, _, st := cycle(nil, 0, 2, 0)
	_, burst, st := cycle(st, 30*time.Second, 2, 3000)
	require.Greater(t, total(burst), total(wantSig), "the backlog orders replicas: %s", burst.Reason)
	// Ten minutes later the ordered replicas are ready and the queue is
	// drained; arrivals are what they were.
	g := fleet(burst.PlannedReplicas["l4"], burst.PlannedReplicas["h100"], 4)
	g.Now = t0.Add(10 * time.Minute)
	after, afterSig, _ := run(t, g, st)
	// The same plan; the mix may differ, as the calm fleet tries the H100
	// it has never run where the drained one already has it.
	assert.InDelta(t, want.Held, after.Held, 1e-9, "after the drain: %s", afterSig.Reason)
	assert.Less(t, total(afterSig), total(burst), "after the drain: %s", afterSig.Reason)
	assert.GreaterOrEqual(t, after.PlanSupply+1e-9, after.Held, "after the drain: %s", afterSig.Reason)
}

// A burst's onset is staffed arrivals two reference replicas above their
// lowest of the last start-up delay, recorded once per start-up delay and
// remembered for two holds.
func TestRisesRecordBurstOnsets(t *testing.T) {
	const horizon, hold = 4 * time.Minute, 48 * time.Minute
	now := t0.Add(time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	calm := []PlanPoint{{At: ago(3 * time.Minute), Rate: 2}, {At: ago(time.Minute), Rate: 2.5}}
	cases := []struct {
		name    string
		prev    []time.Time
		plans   []PlanPoint
		staffed float64
		want    []time.Time
	}{
		{"no history", nil, nil, 9, nil},
		{"a jump of two replicas", nil, calm, 2 + 2*1.5, []time.Time{now}},
		{"less than two replicas", nil, calm, 2 + 1.9*1.5, nil},
		{"the low is within one start-up only", nil, []PlanPoint{{At: ago(10 * time.Minute), Rate: 1}, {At: ago(time.Minute), Rate: 8}}, 9, nil},
		{"once per start-up delay", []time.Time{ago(2 * time.Minute)}, calm, 9, []time.Time{ago(2 * time.Minute)}},
		{"a second burst", []time.Time{ago(20 * time.Minute)}, calm, 9, []time.Time{ago(20 * time.Minute), now}},
		{"kept past the hold", []time.Time{ago(50 * time.Minute), ago(20 * time.Minute)}, calm, 2, []time.Time{ago(50 * time.Minute), ago(20 * time.Minute)}},
		{"forgotten past two holds", []time.Time{ago(100 * time.Minute), ago(20 * time.Minute)}, calm, 2, []time.Time{ago(20 * time.Minute)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, rises(tc.prev, tc.plans, now, tc.staffed, 1.5, horizon, hold))
		})
	}
}

// Bursts have come back when two onsets remembered are less than a hold
// apart, however long ago the first was.
func TestBurstCameBack(t *testing.T) {
	const hold = 48 * time.Minute
	at := func(minutes ...int) []time.Time {
		var out []time.Time
		for _, m := range minutes {
			out = append(out, t0.Add(time.Duration(m)*time.Minute))
		}
		return out
	}
	cases := []struct {
		name   string
		onsets []time.Time
		want   bool
	}{
		{"none", nil, false},
		{"one burst", at(10), false},
		{"ten minutes apart", at(10, 20), true},
		{"a hold apart", at(10, 58), false},
		{"the last pair close", at(0, 60, 70), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, burstCameBack(tc.onsets, hold))
		})
	}
}

// With a start-up delay short enough that the first hold is shorter than
// the trend's window, the planner still keeps the history the trend needs:
// a steady ramp is forecast.
func TestShortStartupKeepsTrendHistory(t *testing.T) {
	a, _ := playRamp(t, seasoned(), 30*time.Second)
	assert.Equal(t, (3 * decision.RateWindow).String(), a.Hold, "a first rise is held three start-ups, a 30 s one counting as the metrics window")
	// 0.02 req/s per second over a 30 s horizon.
	assert.InDelta(t, 0.6, a.Rising, 0.05, "the ramp is forecast over the start-up")
}
