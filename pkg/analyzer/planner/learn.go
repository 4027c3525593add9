package planner

import (
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// learn updates a variant's ITL line from its replicas and derives its
// capacity at the SLO. groupOver is the share of the group's requests over
// target this cycle (window.over).
//
// A variant never seen running has an optimistic prior (its KV cache size
// is unknown until a pod reports it): the plan tries it when it looks
// cheapest, and what its replicas then show corrects the line.
func learn(v decision.Variant, reps []decision.ReplicaMetrics, vs VariantState, slo params.SLO, in, out, groupOver float64, short bool, now time.Time) (VariantAnalysis, VariantState) {
	if v.StartupDelay > 0 {
		vs.StartupDelay = v.StartupDelay
	}
	va := VariantAnalysis{Name: v.Name, Current: v.CurrentReplicas, StartupDelay: startupOf(v, vs, slo).String(), Ready: readyReplicas(v.Name, reps)}
	if va.Ready > vs.LastReady && vs.Seen {
		vs.Settle = settleCycles
	} else if vs.Settle > 0 {
		vs.Settle--
	}
	vs.LastReady, vs.Seen = va.Ready, true
	fit := vs.Fit
	if va.Ready > 0 {
		// Memory fades only while there is something new to learn: what
		// was learned is kept for a variant at zero replicas.
		fit.decay()
	}
	for _, r := range reps {
		if r.Variant != v.Name {
			continue
		}
		if kv := r.KVCapacityTokens(); kv > 0 {
			vs.KVTokens = kv
		}
		if vs.Settle > 0 {
			continue
		}
		if pr, ok := promptRate(r); ok {
			// The fastest reading lately, fading as the fit does: one
			// reading of a minute's TTFT against five minutes' mean
			// prompt can read fast, and must not stay the answer.
			vs.PromptRate = max(pr, vs.PromptRate*forget)
		}
		if r.ArrivalRate > 0 && decision.Finite(r.ArrivalRate) && r.AvgITLms > 0 && decision.Finite(r.AvgITLms) {
			// The replica's own request shape where it reports one.
			pin, pout := in, out
			if r.AvgOutputTokens > 0 && decision.Finite(r.AvgOutputTokens) && r.AvgInputTokens >= 0 && decision.Finite(r.AvgInputTokens) {
				pin, pout = r.AvgInputTokens, r.AvgOutputTokens
			}
			fit.add(r.ArrivalRate*(pin+pout), r.ArrivalRate*pout*(pin+pout/2), 1000/r.AvgITLms, 1)
			vs.PeakLoad = max(vs.PeakLoad, r.ArrivalRate)
		}
	}
	vs.Fit = fit
	lim := Limits{MaxNumSeqs: defaultMaxNumSeqs}
	if v.MaxNumSeqs > 0 {
		lim.MaxNumSeqs = float64(v.MaxNumSeqs)
	}
	switch {
	case vs.KVTokens > 0:
		lim.KVConcurrency = kvHeadroom * vs.KVTokens / (in + out/2)
	}
	va.Curve = fit.solve(prior(slo.TargetITLms, in, out, lim))
	va.Observations = fit.Obs
	va.Limits = lim
	h := headroomOf(vs.Headroom)
	// The KV bound times a request with the shorter of the two fits'
	// ITLs (capacityAt): where they differ, the observations left the
	// slope to the priors.
	timing := va.Curve
	if vs.PromptRate > 0 && in > 0 && va.Curve.P > 0 {
		timing = fit.solve(promptPrior(va.Curve.P, in, out, vs.PromptRate))
	}
	va.Capacity = capacityAt(va.Curve, timing, lim, h, slo.TargetITLms, slo.TargetTTFTms, in, out)
	if vs.Settle == 0 {
		att := observeAttainment(v.Name, reps, groupOver, slo.TargetITLms, slo.TargetTTFTms)
		va.TPOTOverTarget = att.Over
		if att.Requests >= minOverSLORequests {
			vs.ITLOver, vs.ITLOverAt = att.Over, now
			if att.Over <= 1-slo.Attainment {
				vs.ShownLoad = max(vs.ShownLoad, att.Load*(in+out))
			}
		}
		if now.Sub(vs.VerdictAt) < decision.RateWindow {
			// The window still holds requests the last verdict
			// counted: report them, pool nothing.
			att = attainment{}
		}
		prev := h
		var judged bool
		h, vs.TPOTPool, judged = adaptHeadroom(now, h, vs.TPOTPool, att, va.Capacity.Rate, slo.Attainment, short)
		if judged {
			vs.VerdictAt = now
		}
		if h != prev {
			va.Capacity = capacityAt(va.Curve, timing, lim, h, slo.TargetITLms, slo.TargetTTFTms, in, out)
		}
		vs.Headroom = h
	}
	va.Headroom = h
	va.PeakLoad = vs.PeakLoad
	if !short && loadPerReplica(v.Name, reps) <= va.Capacity.Rate {
		// Misses while the group is short of supply or replicas start,
		// or the variant loaded past its rate, are queues the plan
		// orders for, not requests the variant cannot hold.
		vs.TTFTPool = vs.TTFTPool.pool(ttftMisses(v.Name, reps, slo.TargetTTFTms))
	}
	va.TTFTMisses, _ = vs.TTFTPool.share()
	return va, vs
}

// promptRate is the rate a replica computes prompts at, read from its
// mean TTFT while nothing waits in its queue: the prompt tokens not served
// from the prefix cache over the time to their first token (which then
// also holds at most one step of the requests already running, so it
// reads a little low). ok is false while requests queue or a figure is
// missing.
func promptRate(r decision.ReplicaMetrics) (float64, bool) {
	if r.QueueLength != 0 || r.AvgTTFTms <= 0 || !decision.Finite(r.AvgTTFTms) || r.AvgInputTokens <= 0 || !decision.Finite(r.AvgInputTokens) {
		return 0, false
	}
	computed := r.AvgInputTokens * (1 - decision.Clamp01(r.PrefixCacheHitRate))
	return computed / (r.AvgTTFTms / 1000), computed > 0
}

// withinShown bounds a replica's rate for a scale-down by how far its
// variant's requests were seen meeting the ITL target: a line fitted at a
// fraction of its rate extrapolates its slope far (prefill-heavy traffic
// whose bursts fill a step's token budget misses at a third of its fitted
// rate), so a release credits a replica with at most 1/provenShare times
// the highest load per replica (tokens per second, shownTokens) its
// variant served within the target. 0: never seen loaded, unbounded.
func withinShown(rate, shownTokens, in, out float64) float64 {
	if shownTokens <= 0 || in+out <= 0 {
		return rate
	}
	return min(rate, shownTokens/(in+out)/provenShare)
}

// shapeMemory is how long the request shape the plan sizes by takes to
// follow a change of the replicas' token averages (to 63%).
const shapeMemory = 5 * time.Minute

// requestShape is the arrival-weighted mean input and output tokens of the
// replicas, else the remembered shape, else a default.
func requestShape(g decision.Group, st State) (in, out float64) {
	var w, si, so float64
	for _, r := range g.Replicas {
		if r.AvgOutputTokens > 0 && decision.Finite(r.AvgOutputTokens) && r.AvgInputTokens >= 0 && decision.Finite(r.AvgInputTokens) {
			weight := max(r.ArrivalRate, 1e-3)
			w += weight
			si += weight * r.AvgInputTokens
			so += weight * r.AvgOutputTokens
		}
	}
	switch {
	case w > 0 && st.Output > 0 && len(st.Plans) > 0:
		// The replicas' 5m means swing with the few long requests that
		// finish in a window (a reasoning model's 30k-token answers) and
		// read short on a new replica (its short requests finish
		// first): the shape the plan sizes by moves by their average
		// over shapeMemory.
		a := min(1, g.Now.Sub(st.Plans[len(st.Plans)-1].At).Seconds()/shapeMemory.Seconds())
		if a <= 0 {
			a = 1 // no time passed (a replay): the replicas as they are
		}
		return st.Input + a*(si/w-st.Input), st.Output + a*(so/w-st.Output)
	case w > 0:
		return si / w, so / w
	case st.Output > 0:
		return st.Input, st.Output
	default:
		return defaultInputTokens, defaultOutputTokens
	}
}
