package planner

import (
	"fmt"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

const (
	// smallShortfall is the share of the supply a shortfall must exceed
	// to order at once; a smaller one must last persistFor.
	smallShortfall = 0.1
	// persistFor is one metrics rate window (decision.RateWindow): what a
	// shortfall must outlast to be more than one window's noise.
	persistFor = decision.RateWindow
)

// mix is the replicas of each variant (in c.variants' order): added to
// cover a lasting shortfall, kept while replicas start, else the cheapest
// that covers the held plan.
func (c *cycle) mix() []int32 {
	mv := c.mixVariants()
	counts := make([]int32, len(c.variants))
	for i, v := range c.variants {
		counts[i] = decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas)
	}
	if !c.short {
		carryShortfall(c.g.Now, c.st, c.next)
	}
	kind := shortfallNone
	if c.short && !c.saturated {
		kind = lasting(c.g.Now, c.st, c.next, c.an.Supply, c.an.Staffed, c.trend.Steadily && c.trend.Rising > 0)
	}
	ordering := (c.short && c.saturated) || kind == shortfallLasted || kind == shortfallLarge
	if kind == shortfallLasted && c.budgetCoversShortfall() {
		c.next.ShortSince = c.st.ShortSince
		c.an.Why = WhyBudget
		return counts
	}
	switch {
	case ordering:
		return c.order(mv)
	case c.short:
		// A small shortfall not yet a metrics window old: hold.
		c.an.Why = WhyPersist
	case pending(c.variants):
		// Replicas still starting have not shown their capacity yet:
		// give nothing back before they serve, but those ordered for
		// evidence that is gone.
		if m, ok := c.cancel(mv, counts); ok {
			return m
		}
		c.an.Why = WhyHorizon
	default:
		return c.release(mv, counts)
	}
	return counts
}

// order covers the present plan. It only adds, so pending replicas are
// never ordered again. The hold keeps capacity through lulls; it orders
// none for a past peak the fleet was not short of then: that peak was
// planned in req/s of another request shape (longer outputs serve fewer
// req/s).
func (c *cycle) order(mv []mixVariant) []int32 {
	an := &c.an
	fitting := append([]mixVariant(nil), mv...)
	addNoneOf(fitting, c.current, c.missingTTFT)
	counts, ok := orderMix(untriedAtDiscount(fitting, an.Variants), an.Staffed)
	if !ok {
		// The variants that fit cannot cover the plan alone: the others
		// serve the rest, missing the TTFT target on some of it.
		counts, ok = orderMix(untriedAtDiscount(mv, an.Variants), an.Staffed)
	}
	for i, v := range c.variants {
		if untried(an.Variants[i]) && counts[i] > v.CurrentReplicas {
			an.Trying = append(an.Trying, v.Name)
		}
	}
	an.Why = WhyDemand
	switch {
	case an.BacklogRate > an.ArrivalRate*backlogShare:
		an.Why = WhyBacklog
	case an.Supply+1e-9 >= staffed(an.LoadRate+an.BacklogRate, c.ref, c.slo):
		an.Why = WhyTrend
		if an.ProfileRise > max(an.Rising, an.RiseMargin) {
			an.Why = WhyProfile
		}
	}
	if c.saturated {
		an.Why = WhySat
	}
	for i, v := range c.variants {
		if counts[i] > v.CurrentReplicas {
			// Only the last order's replicas can be cancelled.
			c.next.UnheldOrderAt = time.Time{}
			if (an.Why == WhySat && an.SlowFloor == 0) || an.Why == WhyBacklog {
				c.next.UnheldOrderAt = c.g.Now
			}
			break
		}
	}
	if !ok {
		an.Why = WhyMax
	}
	return counts
}

// cancel gives back replicas still starting that were ordered for a
// saturation floor or a backlog once neither stands: a few dozen long
// prompts arriving together queue for a few seconds and saturate every
// replica at one scrape, and the replicas ordered for them would take a
// whole start-up of GPU time to serve a minute before the plan, which
// holds neither, gives them back. Only starting replicas go (Kubernetes
// deletes those first), and only down to what the held plan needs: a
// replica ordered for demand that comes back is held like the demand.
func (c *cycle) cancel(mv []mixVariant, counts []int32) ([]int32, bool) {
	at := c.st.UnheldOrderAt
	if at.IsZero() || c.g.Now.Sub(at) > c.horizon+decision.RateWindow || c.saturated || c.an.Backlog >= 1 {
		return counts, false
	}
	for i, v := range c.variants {
		ready := max(v.CurrentReplicas-v.PendingReplicas, 0)
		mv[i].Hi = counts[i]
		mv[i].Lo = min(max(ready, v.MinReplicas), mv[i].Hi)
	}
	keep, ok := cheapestMix(mv, c.an.Held)
	if !ok || mixCost(mv, keep) >= mixCost(mv, counts)-1e-9 {
		return counts, false
	}
	c.an.Why = WhyCancel
	return keep, true
}

// release gives back what the held plan does not need, or moves to a
// cheaper mix that covers it.
func (c *cycle) release(mv []mixVariant, counts []int32) []int32 {
	an, next := &c.an, c.next
	young := c.g.Now.Sub(next.FoundAt) < c.hold
	for i, v := range c.variants {
		mv[i].Hi = decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas)
		mv[i].Lo = min(v.MinReplicas, mv[i].Hi)
		if young {
			mv[i].Lo = min(max(mv[i].Lo, next.Found[v.Name]), mv[i].Hi)
		}
	}
	// The fitted lines are trusted only as far as the replicas were seen
	// serving within the target (withinShown).
	for i, v := range c.variants {
		mv[i].Rate = withinShown(mv[i].Rate, next.Variants[v.Name].ShownLoad, c.an.Input, c.an.Output)
	}
	shares := c.itlShares()
	for _, i := range shiftFromMissingITL(mv, counts, shares, c.slo.Attainment) {
		an.MissingITL = append(an.MissingITL, fmt.Sprintf("%s (%.1f%% of its requests over the ITL target)", c.variants[i].Name, 100*shares[i]))
	}
	addNoneOf(mv, counts, c.missingTTFT)
	keep := counts
	if m, ok := cheapestMixWhere(mv, an.Held, keepsBusiestWithinTarget(mv, counts, an.Staffed)); ok && mixCost(mv, m) < mixCost(mv, counts)-1e-9 {
		keep = m
	}
	swap, swapping := swapMix(c.variants, an.Variants, mv, keep, an.Held, c.hold, young, shares, c.missingTTFT, c.slo, next, c.g.Now)
	switch {
	case swapping:
		an.Why = WhySwap
		next.UnheldOrderAt = time.Time{}
		return swap
	case mixCost(mv, keep) < mixCost(mv, counts)-1e-9:
		if !completesSwap(c.variants, keep, next.SwapTo) {
			next.LastRelease = c.g.Now
		}
		next.SwapTo = nil
		an.Why = WhyDemand
		return keep
	}
	an.Why = WhyHorizon
	if an.Held <= an.Staffed+1e-9 {
		an.Why = WhyDemand
	}
	return counts
}

// shiftFromMissingITL bounds a mix search while one variant's requests
// miss the ITL target by overSLOBudgets of the SLO's error budget and
// another's meet it within one budget: the mix keeps at least the
// replicas (now, in mv's order) of the variants that meet it and adds none
// of those that miss it, so a release or a swap gives back the variant
// its fitted line overrates, not the one whose requests meet the target
// (a line fitted on prefill-heavy traffic can be off by a factor; the
// requests over the target are measured). shares are the variants' last
// shares over the target (itlShares; negative where none is known). It
// returns the indices of the variants that miss it, none when it bounds
// nothing.
func shiftFromMissingITL(mv []mixVariant, now []int32, shares []float64, attainment float64) []int {
	budget := 1 - attainment
	var missing []int
	running, meeting := false, false
	for i, s := range shares {
		if missesITL(s, attainment) {
			missing = append(missing, i)
			running = running || now[i] > 0
		}
		meeting = meeting || (s >= 0 && s <= budget)
	}
	if !running || !meeting {
		return nil
	}
	addNoneOf(mv, now, missing)
	for i, s := range shares {
		if s >= 0 && s <= budget {
			mv[i].Lo = max(mv[i].Lo, min(now[i], mv[i].Hi))
		}
	}
	return missing
}

// keepsBusiestWithinTarget accepts a release that leaves the busiest
// variant under the gateway's split within 1/itlHeadroom of its line at
// plan d, where its mean ITL reaches the target (or no further past it
// than now), or that gives back only that variant's replicas. The mix's
// supply averages its requests' loads, so giving back replicas of a
// variant the gateway loads less piles requests on the one it loads
// past its line: on Azure conv x4.5, 2 L40S + 4 H100 released to 1 L40S
// + 3 H100 at 27 req/s put the L40S at 1.3 times its line, and the four
// replicas saturated the next minute.
func keepsBusiestWithinTarget(mv []mixVariant, counts []int32, d float64) func([]int32) bool {
	now, _ := busiestLoad(mv, counts, d)
	limit := max(1/itlHeadroom, now)
	return func(m []int32) bool {
		u, factor := busiestLoad(mv, m, d)
		if u <= limit+1e-9 {
			return true
		}
		for i, v := range mv {
			if m[i] != counts[i] && v.factor() < factor {
				return false
			}
		}
		return true
	}
}

// itlShares is each variant's last share of requests over the ITL target
// told within a start-up delay (in c.variants' order), -1 where none is:
// a lull between bursts reports too few requests to tell, and the share
// the last burst showed is what the next one will show while a release
// made now cannot be undone sooner.
func (c *cycle) itlShares() []float64 {
	shares := make([]float64, len(c.variants))
	for i, v := range c.variants {
		shares[i] = -1
		if vs := c.next.Variants[v.Name]; !vs.ITLOverAt.IsZero() && c.g.Now.Sub(vs.ITLOverAt) < c.horizon {
			shares[i] = vs.ITLOver
		}
	}
	return shares
}

// shortfall is how a shortfall of the supply stands against the time it
// has lasted.
type shortfall int

const (
	shortfallNone shortfall = iota
	// shortfallYoung is within smallShortfall of the supply and not yet
	// persistFor old: it waits.
	shortfallYoung
	// shortfallLasted is within smallShortfall and has lasted persistFor:
	// it orders, unless the error budget covers it.
	shortfallLasted
	// shortfallLarge exceeds smallShortfall, or comes on a steady rise:
	// it orders at once.
	shortfallLarge
)

// lasting classifies a shortfall (need over supply) and records when a
// small one began in next. A small shortfall waits a metrics window in
// case it is noise, unless the arrivals rise steadily (rising): then it
// only grows, and the wait delays the replicas it needs by a window. On
// the diurnal hour's rise (seeds 11 and 14) three L40S waited twice, and
// the first H100s, ordered a minute later, served after minutes of 375 to
// 822 misses.
func lasting(now time.Time, st State, next *State, supply, need float64, rising bool) shortfall {
	if need > supply*(1+smallShortfall) || rising {
		return shortfallLarge
	}
	since := st.ShortSince
	if since.IsZero() {
		since = now
	}
	if now.Sub(since) >= persistFor {
		return shortfallLasted
	}
	next.ShortSince = since
	return shortfallYoung
}

// budgetCoversShortfall says whether a small shortfall that lasted
// (shortfallLasted, which mix judges only while the replicas are not
// saturated: saturation is evidence, not a fit's error) waits on the
// error budget instead of ordering: the plan is a fit, the SLO is what
// the requests meet. Only for the demand now (no trend, rise margin or
// daily profile's rise in the plan: the requests cannot show a rise still
// to come), and while the last rate window's share of requests over
// target, for one start-up more (until a replica ordered now would
// serve), leaves the budget unspent.
func (c *cycle) budgetCoversShortfall() bool {
	if max(c.an.Rising, c.an.RiseMargin, c.an.ProfileRise) > 0 {
		return false
	}
	n, share := c.window.misses(c.slo.TargetITLms, c.slo.TargetTTFTms)
	ahead := n * c.horizon.Seconds() / decision.RateWindow.Seconds()
	return n >= minBudgetRequests && c.next.Budget.covers(c.slo.Attainment, ahead, share)
}

// carryShortfall keeps, in a cycle at the plan, when the last small
// shortfall began if that is within two metrics windows: one cycle at the
// plan between two short ones is noise, not the shortfall's end.
func carryShortfall(now time.Time, st State, next *State) {
	if !st.ShortSince.IsZero() && now.Sub(st.ShortSince) < 2*persistFor {
		next.ShortSince = st.ShortSince
	}
}

func pending(variants []decision.Variant) bool {
	for _, v := range variants {
		if v.PendingReplicas > 0 {
			return true
		}
	}
	return false
}

func mixCost(vs []mixVariant, counts []int32) float64 {
	c := 0.0
	for i, v := range vs {
		c += float64(counts[i]) * v.Cost
	}
	return c
}
