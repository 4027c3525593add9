package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// Attainment feedback. The capacity model plans a replica's mean ITL at a
// headroom under the target, but the SLO counts requests: a request's own
// time per output token varies with the prompts prefilled while it
// decodes, by how much depends on the traffic (long prompts and short
// outputs spread it more) and on the engine's chunk size. So each
// variant's headroom is learned from the share of its requests over the
// ITL target (vLLM's per-request TPOT histogram) at loads near the plan's
// rate per replica: the requests of such cycles are pooled until they are
// enough to tell a share over the ITL's part of the error budget from
// noise, then the headroom is lowered when the share exceeds that part
// and raised when it stays well within it. That part is a share of every
// request the variant finished since the last verdict, not only of those
// pooled: the requests of the lighter cycles between seldom miss, and the
// SLO counts them too, so the pooled ones may spend their part as well.
// The pool starts again one rate window later (the histograms then hold
// only requests the verdict did not count: read every 30 s cycle, one
// minute of misses would lower the headroom twice). Misses at a load
// above the plan's rate while the group is short or any of its replicas
// start (an onset: the ready replicas carry the load of those starting)
// say nothing of the headroom: the plan already orders for them; a load
// well under it says little either. But while the group's supply covers
// its demand with every replica ready, the plan orders nothing, and a
// variant loaded above its rate is loaded so by the gateway's split
// (llm-d's scorers balance KV cache usage, not capacity): such cycles are
// pooled. Within a tenth of its rate its own misses say how much of it
// the variant can be credited; further past it, the mix's supply counts
// on it carrying its share past its line (mixSupply), and the group's
// misses (GroupOver) say whether that costs the SLO.
const (
	// minHeadroom and maxHeadroom bound the learned headroom.
	minHeadroom = 0.5
	maxHeadroom = 0.95
	// headroomDown is the factor a verdict over budget applies;
	// headroomUp what a verdict well within it adds back.
	headroomDown = 0.95
	headroomUp   = 0.02
	// itlBudgetShare is the ITL's part of the SLO's error budget: the
	// rest is left to the TTFT and to onsets.
	itlBudgetShare = 0.5
	// verdictMisses is how many misses the budget allows in the pooled
	// requests before a verdict: 10 tells a share twice the budget from
	// the budget (Poisson, about 3 standard deviations).
	verdictMisses = 10
	// loadedShare of the planned rate per replica is the lowest load
	// whose requests are pooled.
	loadedShare = 0.6
)

// attainment is what a variant's replicas show of the ITL target.
type attainment struct {
	// Over is the share of finished requests whose time per output
	// token exceeded the target; Requests how many finished in the
	// rate window.
	Over     float64
	Requests float64
	// GroupOver is the share of all the group's requests over target,
	// counted as Over is.
	GroupOver float64
	// Load is the mean arrival rate per reporting replica.
	Load float64
}

// observeAttainment merges the TPOT and queue-time histograms of the
// variant's replicas over the rate window; groupOver is the group's share
// over target (window.over), merged once a cycle for all its variants.
func observeAttainment(v string, reps []decision.ReplicaMetrics, groupOver, targetITLms, targetTTFTms float64) attainment {
	var h, q decision.Histogram
	for _, r := range reps {
		if r.Variant == v {
			h = h.Merge(r.TPOT)
			q = q.Merge(r.QueueTime)
		}
	}
	a := attainmentOf(h, q, targetITLms, targetTTFTms)
	a.GroupOver = groupOver
	a.Load = loadPerReplica(v, reps)
	return a
}

// over is the share of the group's requests over target, counted as a
// variant's own are (attainmentOf).
func (w window) over(targetITLms, targetTTFTms float64) float64 {
	return attainmentOf(w.tpot, w.queue, targetITLms, targetTTFTms).Over
}

// attainmentOf reads merged TPOT (h) and queue-time (q) histograms: the
// requests they count and the share of them over target.
func attainmentOf(h, q decision.Histogram, targetITLms, targetTTFTms float64) attainment {
	var a attainment
	a.Requests, a.Over = overTarget(h, targetITLms)
	if queued := q.Total(); queued > 0 && targetTTFTms > 0 && a.Requests > 0 {
		// Requests that waited past the TTFT target less their own
		// prefill miss it whatever their decode: a replica whose
		// prefill long prompts block is over the SLO at a load its
		// ITL line calls spare.
		a.Over = min(1, a.Over+q.Above((1-ttftShare)*targetTTFTms/1000))
	}
	return a
}

// loadPerReplica is the mean arrival rate of a variant's reporting
// replicas.
func loadPerReplica(v string, reps []decision.ReplicaMetrics) float64 {
	var load float64
	n := 0
	for _, r := range reps {
		if r.Variant == v {
			if decision.Finite(r.ArrivalRate) && r.ArrivalRate > 0 {
				load += r.ArrivalRate
			}
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return load / float64(n)
}

// overTarget reads a TPOT histogram's rate over the rate window: the
// requests it counts and the share of them over the ITL target.
func overTarget(h decision.Histogram, targetITLms float64) (requests, share float64) {
	return h.Total() * decision.RateWindow.Seconds(), h.Above(targetITLms / 1000)
}

// Pool is the requests pooled towards the next headroom verdict.
type Pool struct {
	Requests float64 `json:"requests,omitempty"`
	Over     float64 `json:"over,omitempty"`
	// Seen is every request the variant finished since the last verdict,
	// pooled or not: the error budget is theirs. Like the group's Budget
	// it forgets over budgetMemory (SeenAt is its last update): a night's
	// light load is not a budget for the morning's bursts.
	Seen   float64   `json:"seen,omitempty"`
	SeenAt time.Time `json:"seenAt,omitzero"`
}

// see decays the requests seen to now and adds n.
func (p Pool) see(now time.Time, n float64) Pool {
	if !p.SeenAt.IsZero() && now.After(p.SeenAt) {
		p.Seen *= forgetting(now.Sub(p.SeenAt))
	}
	p.Seen += n
	p.SeenAt = now
	return p
}

// headroomOf is a variant's headroom, startHeadroom until it is first
// analyzed (0).
func headroomOf(h float64) float64 {
	if h <= 0 {
		return startHeadroom
	}
	return h
}

// adaptHeadroom pools what the replicas show when their load is near the
// plan's rate per replica (planned, at the current headroom h; 0: never
// adapted), or above it when the group was not short of supply (short
// also while replicas start), counts every request it is shown, and
// returns the headroom and pool for the next cycle, and whether it judged
// the pool.
func adaptHeadroom(now time.Time, h float64, pool Pool, a attainment, planned, target float64, short bool) (float64, Pool, bool) {
	h = headroomOf(h)
	if a.Requests > 0 {
		pool = pool.see(now, a.Requests)
	}
	if a.Requests <= 0 || planned <= 0 || a.Load < loadedShare*planned {
		return h, pool, false
	}
	if a.Load > planned*(1+smallShortfall) {
		if short {
			return h, pool, false
		}
		// Loaded well past its rate with the group's supply covering
		// its demand and nothing starting, the variant is loaded so by
		// the gateway's split, and the mix's supply (mixSupply) counts
		// on it carrying its share past its line while the others
		// idle: whether that costs the SLO is the group's misses, not
		// its own. Judged by its own, an L40S beside H100s ratchets
		// down to the lowest headroom while the group meets its
		// target, and the plan pays again for capacity the H100s leave
		// idle.
		a.Over = a.GroupOver
	}
	pool.Requests += a.Requests
	pool.Over += a.Over * a.Requests
	budget := itlBudgetShare * (1 - target)
	if budget <= 0 {
		return h, pool, false
	}
	if expected := pool.Requests * budget; expected < verdictMisses && !clearlyOver(pool.Over, expected) {
		return h, pool, false
	}
	// The verdict waits for enough pooled requests (above): after a lull,
	// a few hundred loaded ones say little of the loaded replicas. The
	// budget they are judged against is a share of every request seen.
	budget *= max(1, pool.Seen/pool.Requests)
	switch share := pool.Over / pool.Requests; {
	case share > budget:
		h *= headroomDown
	case share <= budget/2:
		h += headroomUp
	}
	return math.Min(maxHeadroom, math.Max(minHeadroom, h)), Pool{}, true
}

// clearlyOver says misses pooled before a full verdict's requests already
// tell a share over the budget from noise: at least verdictMisses of them,
// three standard deviations (Poisson) over the expected. An L40S missing
// 3% of its requests against a budget of 0.5% shows it in 2 minutes,
// where the full pool would take 8 at its 4 req/s.
func clearlyOver(misses, expected float64) bool {
	return misses >= verdictMisses && misses > expected+3*math.Sqrt(expected)
}
