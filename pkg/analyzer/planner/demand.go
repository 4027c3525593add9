package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// demand is the rate to serve: arrivals, their rise over the start-up
// delay and the backlog, staffed with the margin for the attainment.
func (c *cycle) demand() {
	an := &c.an
	an.ArrivalRate, an.ArrivalSource = demand(c.g)
	an.Backlog = c.g.SchedulerQueueSize
	for _, r := range c.g.Replicas {
		an.Backlog += r.QueueLength
	}
	c.horizon = startupHorizon(c.variants, c.next.Variants, c.slo)
	an.Horizon = c.horizon.String()
	// The backlog is drained over one start-up delay: a replica ordered for
	// it serves while there is still backlog to serve. The backlog
	// projected to the end of the start-up is not the rate to order for:
	// the replicas already serving drain much of it meanwhile. But a
	// backlog growing now grows as fast until what is ordered serves
	// (arrivals over what the replicas really serve, whatever their
	// fitted capacity says): that growth is ordered too, once, rather
	// than as a top-up each cycle that comes a start-up late.
	// A backlog worth ordering for (as WhyBacklog) is ordered only while
	// it outlasts what is already starting: replicas ordered now serve
	// one start-up later, and when the replicas on their way (ordered
	// for this backlog a cycle or two ago) will have drained it by then,
	// they would serve none of it. At a spike, six L40S ordered that way
	// started two minutes after the backlog was gone. When some is left,
	// every replica ordered shortens the drain, during which each arrival
	// waits past the TTFT target, so the whole backlog and its growth are
	// ordered.
	c.next.Backlog, c.next.BacklogAt, c.next.DrainedAt = an.Backlog, c.g.Now, c.st.DrainedAt
	dt := c.g.Now.Sub(c.st.BacklogAt)
	recent := !c.st.BacklogAt.IsZero() && dt > 0 && dt <= 2*decision.RateWindow
	if recent && an.Backlog > c.st.Backlog {
		an.BacklogGrowth = (an.Backlog - c.st.Backlog) / dt.Seconds()
	}
	an.BacklogRate = an.Backlog/c.horizon.Seconds() + an.BacklogGrowth
	an.BacklogLeft = projectedBacklog(an.Backlog, an.BacklogGrowth, c.starting(), c.horizon)
	if an.BacklogRate > backlogShare*an.ArrivalRate && an.BacklogLeft == 0 {
		an.BacklogRate = 0
	}
	if recent && drained(c.st.Backlog, an.Backlog, an.ArrivalRate, c.horizon) {
		c.next.DrainedAt = c.g.Now
	}
	c.trend = trendOf(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon)
	an.Rising = c.trend.Rising
	c.ref = referenceCapacity(c.variants, c.caps)
	// Rises are read at the timescale of the load they bring: a burst of
	// arrivals shorter than a request adds less than its height to the
	// requests in flight (a reasoning model's minutes-long answers).
	span := time.Duration(c.ref.RequestSeconds * float64(time.Second))
	c.next.RiseHistory = c.st.RiseHistory.record(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon, span)
	// So is the rate served: requests that last minutes are in flight at
	// the rate of the minutes they last, not of the last rate window.
	an.LoadRate = loadRate(c.st.Plans, c.g.Now, an.ArrivalRate, min(span, c.horizon))
	// A rise is a share of the rate it rises from, mostly the level: while
	// the error budget holds, a burst's peak is not planned with the
	// history's rises stacked on it again (a burst beyond costs misses the
	// budget pays); once it is spent, every rise is planned from the rate
	// now.
	an.Level = levelOf(c.st.Plans, c.g.Now, an.ArrivalRate)
	spent := c.st.Budget.spent(c.slo.Attainment)
	base := an.LoadRate
	if !spent {
		base = riseBase(c.st.Plans, c.g.Now, an.LoadRate, an.Level, c.horizon)
	}
	an.RiseMargin = base * c.next.RiseHistory.margin(c.slo.Attainment)
	// heldMargin is the part of the margin the hold keeps with the demand.
	heldMargin := an.RiseMargin
	if !c.next.RiseHistory.enough() && len(c.st.Rises) == 0 {
		// Too young for the histogram: the delays it remembers are the
		// only evidence of how fast it rises, enough to plan on (waiting
		// for the budget to be spent would pay for the evidence with
		// misses first), not to hold a fleet through the lull after a
		// peak on (a one-hour trace's fall then costs the peak's fleet).
		// A burst's onset (rises) is the hold's to keep, not a margin to
		// read from one sample.
		an.RiseMargin = an.LoadRate * recentRise(c.st.Plans, c.g.Now, an.ArrivalRate, an.LoadRate, c.horizon, span, c.slo.Attainment)
		heldMargin = 0
	}
	c.next.Profile = c.st.Profile
	if !c.g.Now.IsZero() {
		c.next.Profile = c.st.Profile.record(c.g.Now, an.ArrivalRate)
	}
	// The profile's rise is ordered, not held: a rise that does not come
	// is given back once the profile no longer says it is ahead.
	an.ProfileRise = c.next.Profile.rise(c.g.Now, c.horizon)
	rate := an.LoadRate + max(an.Rising, an.RiseMargin, an.ProfileRise) + an.BacklogRate
	an.Staffed = staffed(rate, c.ref, c.slo)
	an.StaffedArrivals = staffed(an.LoadRate+heldMargin, c.ref, c.slo)
	if floor, n, slow := saturationFloor(c.g, c.caps, c.ref, c.scaling, c.slo, !c.settling()); floor > rate && !c.absorbing() {
		// The replicas say demand is more than the rates do: a renamed
		// counter, a scrape gap or a capacity fitted too high. Like a
		// backlog, the floor orders now and is not held: saturation
		// while a backlog drains is not demand that comes back.
		c.saturated = true
		an.Saturated, an.Slow, an.Reporting, an.Floor = n, slow, len(c.g.Replicas), floor
		byRates := an.Staffed
		an.Staffed = staffed(floor, c.ref, c.slo)
		if slow*2 > len(c.g.Replicas) && byRates < floor-c.ref.Rate {
			// Most replicas are over the ITL target, not just queued,
			// and the rates do not explain it (they ask for less than
			// the floor by more than a replica): their capacity was
			// fitted too high, and what the floor orders is held for a
			// short hold (while the attainment feedback lowers the
			// capacity), not given back the next cycle to be ordered
			// again. Saturation the rates explain (a fleet short of
			// the demand it sees, the replicas it ordered starting) is
			// met by the plan and gone once they serve.
			an.SlowFloor = an.Staffed
		}
	}
}

// settling says a variant gained ready replicas within settleCycles: the
// TPOT histograms of the rate window still hold the requests served
// before those took their share.
func (c *cycle) settling() bool {
	for _, v := range c.variants {
		if c.next.Variants[v.Name].Settle > 0 {
			return true
		}
	}
	return false
}

// drained says a backlog worth ordering for (a tenth of the arrivals
// over a start-up, as WhyBacklog) was at least halved within a cycle: the
// replicas that served it took it all at once.
func drained(before, now, arrivals float64, horizon time.Duration) bool {
	return before > 0 && now <= before/2 && before/horizon.Seconds() > backlogShare*arrivals
}

// absorbing says the replicas are still serving a backlog drained within
// the last two rate windows, and replicas ordered now would start after
// that. They run full and slow while they do, which is the backlog's
// load, ordered for while it waited, not demand the rates miss or a
// capacity fitted too high: the saturation floor would order, and hold,
// capacity for requests already served (at a spike, 2.6 times the
// arrivals). With a start-up within the two windows the floor's replicas
// serve while it still stands, and the next cycle judges them.
func (c *cycle) absorbing() bool {
	at := c.next.DrainedAt
	return !at.IsZero() && c.g.Now.Sub(at) <= 2*decision.RateWindow && c.horizon > 2*decision.RateWindow
}

// demand is the arrival rate: the gateway's when reported, else what the
// replicas complete (under-reads while a queue grows).
func demand(g decision.Group) (float64, string) {
	if g.GatewayArrivalsReported && g.GatewayArrivalRate >= 0 && decision.Finite(g.GatewayArrivalRate) {
		return g.GatewayArrivalRate, "gateway arrivals"
	}
	var sum float64
	for _, r := range g.Replicas {
		if r.ArrivalRate > 0 && decision.Finite(r.ArrivalRate) {
			sum += r.ArrivalRate
		}
	}
	return sum, "replica completions"
}

// loadRate is the mean arrival rate over the last span: the current rate
// window's and those of the remembered cycles whose windows fall within
// it. A span within one rate window is the current rate. The rise history
// smooths each of its points the same way.
func loadRate(plans []PlanPoint, now time.Time, cur float64, span time.Duration) float64 {
	sum, n := cur, 1.0
	for _, p := range plans {
		if now.Sub(p.At)+decision.RateWindow <= span {
			sum += p.Arrivals
			n++
		}
	}
	return sum / n
}

// staffed is a rate plus the square-root margin for the SLO's attainment:
// the requests in service fluctuate by about sqrt(rate * duration) around
// the mean (in concurrency slots).
func staffed(rate float64, ref ReplicaCapacity, slo params.SLO) float64 {
	if rate <= 0 || ref.RequestSeconds <= 0 {
		return rate
	}
	return rate + z(slo.Attainment)*math.Sqrt(rate/ref.RequestSeconds)
}

// z is the standard normal quantile of p (p in (0, 1); the SLO attainment
// is validated to [0.5, 0.9999]).
func z(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// backlogShare of the arrivals is the backlog rate (drained over a
// start-up) that makes an order the backlog's.
const backlogShare = 0.1

// startupHorizon is the longest start-up delay among the variants holding
// replicas (among all when none does): what a lull costs to ride out is
// the start-up of the capacity it would give back, not of a variant the
// plan does not use.
func startupHorizon(variants []decision.Variant, learned map[string]VariantState, slo params.SLO) time.Duration {
	h := time.Duration(0)
	for _, holding := range []bool{true, false} {
		for _, v := range variants {
			if v.MaxReplicas == 0 || (holding && v.CurrentReplicas == 0) {
				continue
			}
			h = max(h, startupOf(v, learned[v.Name], slo))
		}
		if h > 0 {
			break
		}
	}
	return max(h, 30*time.Second)
}

// startupOf is a variant's measured start-up delay, else the last one
// measured, else the configured fallback.
func startupOf(v decision.Variant, vs VariantState, slo params.SLO) time.Duration {
	switch {
	case v.StartupDelay > 0:
		return v.StartupDelay
	case vs.StartupDelay > 0:
		return vs.StartupDelay
	}
	return slo.StartupDelay.D()
}

// referenceCapacity is the capacity of the variant with the lowest cost
// per unit of rate: the one the margin is mostly made of.
func referenceCapacity(variants []decision.Variant, caps map[string]ReplicaCapacity) ReplicaCapacity {
	var best ReplicaCapacity
	bestUnit := math.Inf(1)
	for _, v := range variants {
		c := caps[v.Name]
		// A variant at the fair price ties with its reference: the
		// first stays, not whichever rounds lower.
		if c.Rate > 0 && v.MaxReplicas > 0 && v.Cost/c.Rate < bestUnit*(1-1e-9) {
			best, bestUnit = c, v.Cost/c.Rate
		}
	}
	return best
}
