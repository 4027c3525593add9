package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// holdPeak compares the supply with the demand, adapts the hold to the
// lulls seen, and holds the highest plan of the hold.
func (c *cycle) holdPeak() {
	an := &c.an
	unit := lullUnit(c.horizon)
	c.current = make([]int32, len(c.variants))
	for i, v := range c.variants {
		c.current[i] = v.CurrentReplicas
	}
	an.Supply = c.supplyOf(c.current)
	c.short = an.Supply+1e-9 < an.Staffed
	c.next.Short = c.short
	c.adaptHold(unit)
	c.hold = lulls(c.next.HoldFactor, unit)
	c.next.Rises = rises(c.st.Rises, c.st.Plans, c.g.Now, an.StaffedArrivals, c.ref.Rate, c.horizon, c.hold)
	c.next.Budget = c.st.Budget.record(c.g.Now, c.window, c.slo.TargetITLms, queuedTTFT(an.Backlog, c.slo.TargetTTFTms))
	an.BudgetSpent = c.next.Budget.spent(c.slo.Attainment)
	// Whether bursts come back is judged within the first hold
	// (holdFactor, which the learned hold never falls below), not the
	// learned one: the learned hold grows each time demand comes back
	// within it, and judged against itself every burst of a busy day
	// (40 minutes apart on average, all within 2h8m) would have come back.
	if c.next.RiseHistory.enough() && !burstCameBack(c.next.Rises, lulls(holdFactor, unit)) && !an.BudgetSpent {
		// No burst has come back within the hold: nothing says the
		// capacity a rise needed will be needed again soon, and a one-off
		// spike's fleet is not kept for the rest of the hour, while the
		// error budget can pay for the next onset if one comes. A group
		// with less than minRiseHistory of rises has not shown whether
		// its bursts come back: a burst's return onto a fleet given back
		// costs more than the whole budget (the bursty hour's second
		// burst misses a tenth of the hour's requests), so its first lull
		// keeps the full hold.
		c.hold = min(c.hold, lulls(shortHoldFactor, unit))
	}
	if len(c.next.Rises) == 0 && falling(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon) {
		// A steady fall with no burst in memory is a curve going down (a
		// day's evening), not a lull a burst comes back from: what it
		// gives back is not needed within a start-up, so the hold keeps
		// one start-up's plans, not the peak's for minutes down the curve.
		c.hold = min(c.hold, unit)
	}
	an.Hold = c.hold.String()
	c.remember()
}

// adaptHold doubles the hold when demand comes back over capacity given
// back within it, and shrinks it when a release held for a whole hold.
func (c *cycle) adaptHold(unit time.Duration) {
	next, last := c.next, c.st.LastRelease
	if next.HoldFactor <= 0 {
		next.HoldFactor = holdFactor
	}
	switch {
	case c.short && !last.IsZero() && c.g.Now.Sub(last) < lulls(next.HoldFactor, unit):
		// Demand came back over capacity given back within the hold.
		next.HoldFactor = min(next.HoldFactor*2, maxHoldFactor)
		next.LastRelease = time.Time{}
	case !last.IsZero() && c.g.Now.Sub(last) >= lulls(next.HoldFactor, unit):
		// A release that held for a whole hold was right.
		next.HoldFactor = max(next.HoldFactor*0.75, minHoldFactor)
		next.LastRelease = time.Time{}
	}
}

// remember holds the highest plan of the hold and keeps this cycle's for
// the next.
func (c *cycle) remember() {
	an, next := &c.an, c.next
	an.Held = an.Staffed
	// Plans are remembered for the longer of the hold and the trend's
	// window: a short hold must not starve the trend of history.
	keep := max(c.hold, trendWindow(c.horizon), levelWindow)
	unit := lullUnit(c.horizon)
	slowHold := min(c.hold, lulls(shortHoldFactor, unit))
	for _, p := range c.st.Plans {
		age := c.g.Now.Sub(p.At)
		if age < keep {
			next.Plans = append(next.Plans, p)
		}
		if age < c.hold {
			an.Held = max(an.Held, p.Rate*levelRatio(p.Level, an.Level))
		}
		if age < slowHold {
			an.Held = max(an.Held, p.SlowFloor)
		}
		if age < unit {
			// Capacity given back must not be needed within a start-up:
			// on a ramp, the forecast of a cycle ago with its noise.
			an.Held = max(an.Held, p.Forecast)
		}
	}
	// The hold remembers arrivals, not the backlog: a backlog is drained
	// once, and the rate that drained it is not needed again.
	// The trend's forecast is held for a start-up only on a line: after a
	// burst's step it is a transient the burst's own plan already holds.
	// On a line, what is given back now must also cover the line two
	// start-ups ahead (the start-up until it is needed again plus the one
	// to get it back), so the held plan keeps that forecast too.
	var forecast float64
	if c.trend.Steadily {
		forecast = staffed(an.LoadRate+2*an.Rising, c.ref, c.slo)
		an.Held = max(an.Held, forecast)
	}
	next.Plans = append(next.Plans, PlanPoint{At: c.g.Now, Rate: an.StaffedArrivals, Arrivals: an.ArrivalRate, Forecast: forecast, SlowFloor: an.SlowFloor, Level: an.Level})
	if len(next.Plans) > maxHistory {
		next.Plans = next.Plans[len(next.Plans)-maxHistory:]
	}
}

// shortHoldFactor lullUnits is the hold until a burst comes back:
// long enough to ride out the dips within one burst.
const shortHoldFactor = 3

// rises records a burst's onset when the staffed arrivals exceed their
// lowest of the last start-up delay by two reference replicas, at most one
// per start-up delay, and keeps those within two holds (burstCameBack).
func rises(prev []time.Time, plans []PlanPoint, now time.Time, staffedNow, refRate float64, horizon, hold time.Duration) []time.Time {
	var out []time.Time
	for _, t := range prev {
		if now.Sub(t) < 2*hold {
			out = append(out, t)
		}
	}
	low := math.Inf(1)
	for _, p := range plans {
		if now.Sub(p.At) <= horizon {
			low = min(low, p.Rate)
		}
	}
	if refRate > 0 && !math.IsInf(low, 1) && staffedNow-low >= 2*refRate && (len(out) == 0 || now.Sub(out[len(out)-1]) >= horizon) {
		out = append(out, now)
	}
	return out
}

// burstCameBack says a burst of the last two holds came back within a
// hold of the one before it. Bursts 10 minutes apart have shown how soon
// they return even once the first is older than the hold, so the last
// one's capacity is kept for the full hold, not given back after a short
// one just before the next comes.
func burstCameBack(onsets []time.Time, hold time.Duration) bool {
	for i := 1; i < len(onsets); i++ {
		if onsets[i].Sub(onsets[i-1]) < hold {
			return true
		}
	}
	return false
}

// lullUnit is what the hold counts a lull in: the time capacity given
// back takes to serve again. That is its start-up, but never less than
// one metrics window: the demand that needs it back is seen no sooner.
// Counted in start-ups as short as 30 s, a bursty hour would release its
// fleet in every lull, and each burst's onset would then cost more misses
// than the SLO allows.
func lullUnit(horizon time.Duration) time.Duration { return max(horizon, decision.RateWindow) }

// lulls is factor lull units: the holds and the bounds on them are
// counted in them.
func lulls(factor float64, unit time.Duration) time.Duration {
	return time.Duration(factor * float64(unit))
}
