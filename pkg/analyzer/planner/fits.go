package planner

import (
	"slices"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Requests that fit. Long prompts miss the TTFT target on a variant that
// prefills them slowly (an L40S's 2048-token chunks take over 2 s on a
// 16k-token prompt), and the requests batched or queued behind them miss
// it too; more replicas of that variant spread the same prompts over
// more queues but prefill none of them faster. A variant that prefills
// faster does. So each variant's share of requests over the TTFT target
// is pooled from its replicas' TTFT histograms, and when the running
// variants miss more than the TTFT's part of the SLO's error budget, the
// plan keeps at least one replica of the variant that misses clearly
// fewer (or tries one never run): the gateway sends it its part of the
// traffic, and that part meets the target more often. On the ServeGen
// reasoning half day the L40S replicas missed the TTFT target on 4.3% of
// their requests, the H100s on 2.0%.
const (
	// ttftPoolDecay is what a variant's pooled requests keep each cycle
	// it reports new ones: a memory of about half an hour of cycles.
	ttftPoolDecay = 0.98
	// minTTFTPool is how many pooled requests a share is read from.
	minTTFTPool = 200
	// fewerMisses is the most a variant may miss, as a share of the
	// worst running variant's misses, to count as holding what that one
	// cannot.
	fewerMisses = 0.75
)

// ttftMisses reads a variant's replicas' TTFT histograms over the rate
// window: the requests that got their first token, and how many of them
// missed the TTFT target by a whole bucket. vLLM's TTFT buckets have no
// bound at common targets (1 s, then 2.5 s), and interpolating inside
// the bucket counts requests at 1.2 s as over a 2 s target in
// proportion: a lone L40S serving 2k-token prompts at 0.8 req/s would
// read 2% over where none is. So misses count from the first bound at
// or above the target, a lower bound on them.
func ttftMisses(v string, reps []decision.ReplicaMetrics, targetTTFTms float64) (requests, misses float64) {
	var ttft decision.Histogram
	for _, r := range reps {
		if r.Variant == v {
			ttft = ttft.Merge(r.TTFT)
		}
	}
	requests = ttft.Total() * decision.RateWindow.Seconds()
	if requests <= 0 || targetTTFTms <= 0 {
		return 0, 0
	}
	return requests, wholeBucketsAbove(ttft, targetTTFTms/1000) * requests
}

// wholeBucketsAbove is the share of a histogram's requests from its first
// bound at or above target on (ttftMisses).
func wholeBucketsAbove(h decision.Histogram, target float64) float64 {
	for _, b := range h.Bounds {
		if b >= target {
			target = b
			break
		}
	}
	return h.Above(target)
}

// pool adds a cycle's requests to a decayed pool; a cycle with none
// leaves it as it was (a variant at zero replicas keeps what it showed).
func (p Pool) pool(requests, misses float64) Pool {
	if requests <= 0 {
		return p
	}
	return Pool{Requests: p.Requests*ttftPoolDecay + requests, Over: p.Over*ttftPoolDecay + misses}
}

// share is a pool's share of misses, and whether it holds enough
// requests to be read.
func (p Pool) share() (float64, bool) {
	if p.Requests < minTTFTPool {
		return 0, false
	}
	return p.Over / p.Requests, true
}

// holdsTheRest returns the variant (index into variants) the plan keeps
// at least one replica of, or -1: when a running variant misses the
// TTFT target on clearly more than the TTFT's part of the error budget
// (clearlyOver: three standard deviations over it), the
// variant that misses at most fewerMisses of the worst of them, or one
// whose misses are unknown (never run, or too few of its requests pooled
// to read) until it serves.
//
// The variant kept last cycle (kept) stays while it misses fewer than
// the worst running variant and that one misses more than the budget at
// all (not clearly): the shares are noisy, and a replica released at a
// dip is ordered again at the next, a start-up paid for nothing (on the
// ServeGen reasoning half day at half rate the H100 went and came back
// five times in its first 80 minutes, where the L40S missed 1.1-1.6%
// against a budget of 0.5%, about three standard deviations).
func holdsTheRest(variants []decision.Variant, learned map[string]VariantState, slo params.SLO, kept string) int {
	budget := (1 - itlBudgetShare) * (1 - slo.Attainment)
	worst, over := 0.0, 0.0
	for _, v := range variants {
		if v.Role.Normalized() != decision.RoleBoth {
			// A prefill or decode replica sees only part of a request's
			// time to first token.
			return -1
		}
	}
	for _, v := range variants {
		p := learned[v.Name].TTFTPool
		share, ok := p.share()
		if !ok || v.CurrentReplicas == 0 {
			continue
		}
		if clearlyOver(p.Over, p.Requests*budget) {
			worst = max(worst, share)
		}
		if share > budget {
			over = max(over, share)
		}
	}
	if worst == 0 {
		if i := slices.IndexFunc(variants, func(v decision.Variant) bool { return v.Name == kept }); i >= 0 && variants[i].MaxReplicas > 0 {
			if share, ok := learned[kept].TTFTPool.share(); ok && share < over {
				return i
			}
		}
		return -1
	}
	best, bestShare := -1, fewerMisses*worst
	for i, v := range variants {
		if v.MaxReplicas == 0 {
			continue
		}
		share, ok := learned[v.Name].TTFTPool.share()
		if v.Name == kept && ok && share < worst {
			return i
		}
		switch {
		case ok && share <= bestShare:
			best, bestShare = i, share
		case !ok && best < 0:
			// Never run, or run too briefly to read (a trial released
			// before minTTFTPool of its requests pooled): its misses are
			// unknown until it serves, so it is tried (again). Read as
			// "misses as many", an H100 given back four minutes after a
			// trial was never tried again while the L40S alone missed the
			// TTFT target on 2.5-6.5% of the ServeGen reasoning half day's
			// requests for 12 hours.
			best = i
		}
	}
	return best
}

// missingTTFT returns the variants (indices into variants) the mix adds
// no replicas of while the plan keeps kept for the rest: those whose own
// requests were seen to miss the TTFT target on clearly more than the
// kept variant's (it misses at most fewerMisses of theirs). More replicas
// of a variant that prefills long prompts past the target spread the
// same prompts over more queues and prefill none of them faster, while
// every replica of the kept one takes its part of the traffic and meets
// the target more often: on the ServeGen reasoning half day the L40S
// grew to 3 or 4 replicas alone and missed the TTFT target on 2-5% of
// their requests where the H100 missed 1-2%. None while the kept
// variant's own misses are unknown (tried, never run).
func missingTTFT(variants []decision.Variant, learned map[string]VariantState, kept string) []int {
	best, ok := learned[kept].TTFTPool.share()
	if kept == "" || !ok {
		return nil
	}
	var worse []int
	for i, v := range variants {
		if share, ok := learned[v.Name].TTFTPool.share(); ok && v.Name != kept && best <= fewerMisses*share {
			worse = append(worse, i)
		}
	}
	return worse
}

// addNoneOf bounds a mix search to add no replicas (beyond now, in mv's
// order) of the variants listed.
func addNoneOf(mv []mixVariant, now []int32, variants []int) {
	for _, i := range variants {
		mv[i].Hi = max(min(mv[i].Hi, now[i]), mv[i].Lo)
	}
}
