package planner

import (
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// startingBatch is one variant's replicas still starting: the rate they
// serve once Ready, and how long until they are.
type startingBatch struct {
	in   time.Duration
	rate float64
}

// starting is the capacity already ordered and not yet serving. A
// variant's starting replicas are expected Ready one start-up delay
// after its decision of record last changed (the latest order, so the
// latest they can be). Replicas later than that by more than a rate
// window are not counted on: pods stuck Pending (no GPU free, an image
// that does not pull) serve nothing, and the backlog is ordered for as
// if they were not there.
//
// Replicas Ready since the last cycle count as starting now: the
// backlog's growth was measured before they served.
func (c *cycle) starting() []startingBatch {
	var out []startingBatch
	for i, v := range c.variants {
		ready := c.an.Variants[i].Ready
		if prev := c.st.Variants[v.Name]; prev.Seen && ready > prev.LastReady {
			out = append(out, startingBatch{rate: float64(ready-prev.LastReady) * c.caps[v.Name].Rate})
		}
		if in, ok := startingIn(v, ready, c.next.Variants[v.Name], c.slo, c.g.Now); ok {
			out = append(out, startingBatch{in: in, rate: float64(v.CurrentReplicas-ready) * c.caps[v.Name].Rate})
		}
	}
	return out
}

// startingIn is how long until a variant's starting replicas (current
// less ready) are expected Ready: one start-up delay after its decision
// of record last changed. ok is false when none start, or when they are
// later than that by more than a rate window: stuck Pending.
func startingIn(v decision.Variant, ready int32, vs VariantState, slo params.SLO, now time.Time) (time.Duration, bool) {
	if v.CurrentReplicas <= ready || v.LastUpdate.IsZero() {
		return 0, false
	}
	in := v.LastUpdate.Add(startupOf(v, vs, slo)).Sub(now)
	if in < -decision.RateWindow {
		return 0, false
	}
	return max(in, 0), true
}

// replicasStarting says whether replicas of the group are starting and
// expected to serve (not stuck Pending).
func (c *cycle) replicasStarting() bool {
	for _, v := range c.variants {
		if _, ok := startingIn(v, readyReplicas(v.Name, c.g.Replicas), c.st.Variants[v.Name], c.slo, c.g.Now); ok {
			return true
		}
	}
	return false
}

// readyReplicas counts the variant's reporting (Ready) replicas.
func readyReplicas(v string, reps []decision.ReplicaMetrics) int32 {
	var n int32
	for _, r := range reps {
		if r.Variant == v {
			n++
		}
	}
	return n
}

// projectedBacklog is the backlog left when a replica ordered now first
// serves, one horizon ahead: it grows at growth (arrivals over what the
// serving replicas drain, req/s) until the replicas already starting
// serve, and each batch of them drains it at its rate from then on. With
// nothing starting that is backlog + growth x horizon.
func projectedBacklog(backlog, growth float64, batches []startingBatch, horizon time.Duration) float64 {
	batches = append([]startingBatch(nil), batches...)
	sort.Slice(batches, func(i, j int) bool { return batches[i].in < batches[j].in })
	left, slope, at := backlog, growth, time.Duration(0)
	for _, b := range batches {
		if b.in >= horizon {
			break
		}
		left = max(0, left+slope*(b.in-at).Seconds())
		slope -= b.rate
		at = b.in
	}
	return max(0, left+slope*(horizon-at).Seconds())
}
