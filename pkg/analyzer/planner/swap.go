package planner

import (
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

const (
	// minSwapSaving is the share of the fleet's cost a cheaper mix must
	// save before the fleet moves to it: below it, the capacity estimates'
	// noise could move the fleet back and forth.
	minSwapSaving = 0.05
	// swapPayback is how many times over the saving within the hold must
	// repay the replicas that run twice while the cheaper mix starts.
	swapPayback = 2.0
)

// swapMix starts moving a steady fleet to a cheaper mix of variants that
// covers need. A scale-up only adds and a scale-down only removes, so
// without it a fleet keeps whatever dear variant it was found with or
// added when the cheap one was at its maximum, for as long as the plan
// holds its capacity. The move is make-before-break: the cheaper mix's
// replicas are ordered now (the returned counts keep every current
// replica keep still needs and add those), and the scale-down releases
// the others once the new ones serve, which then completes the swap.
//
// It moves only toward variants whose capacity has been proven by their
// own replicas (never toward a prior), at most once per hold, never away
// from replicas still settling (settleCycles), and when the saving over
// the hold repays swapPayback times the cost of the replicas that run
// twice during their start-up; never toward a variant
// whose requests miss the ITL target while another's meet it (shares,
// shiftFromMissingITL) or miss the TTFT target clearly more than the
// variant kept for them (missingTTFT). base is the plan's mixVariant per
// variant (its Lo and Hi are set here).
func swapMix(variants []decision.Variant, an []VariantAnalysis, base []mixVariant,
	keep []int32, need float64, hold time.Duration, young bool, shares []float64, missingTTFT []int, slo params.SLO, next *State, now time.Time) ([]int32, bool) {
	if !next.SwapAt.IsZero() && now.Sub(next.SwapAt) < hold {
		return nil, false
	}
	mv := append([]mixVariant(nil), base...)
	for i := range mv {
		mv[i].Hi = mv[i].Max
		if !proven(an[i]) {
			// A variant not proven is neither a target nor a rate to
			// count on beyond what runs today.
			mv[i].Hi = min(keep[i], mv[i].Hi)
		}
		mv[i].Lo = min(mv[i].Min, mv[i].Hi)
	}
	shiftFromMissingITL(mv, keep, shares, slo.Attainment)
	addNoneOf(mv, keep, missingTTFT)
	if young {
		// The fleet as found keeps its capacity for a hold; a swap may
		// change its mix but covers at least the capacity found.
		found := make([]int32, len(variants))
		for i, v := range variants {
			found[i] = next.Found[v.Name]
		}
		need = max(need, mixSupply(mv, found))
	}
	target, ok := cheapestMix(mv, need)
	if !ok {
		return nil, false
	}
	for i, v := range variants {
		if target[i] < keep[i] && next.Variants[v.Name].Settle > 0 {
			// Replicas that just became ready have not shown their
			// requests' share over the ITL target yet: a move that
			// gives them back undoes the scale-up that chose them
			// before they were measured (the workdays' 09:50 rise).
			return nil, false
		}
	}
	saving := mixCost(mv, keep) - mixCost(mv, target)
	if saving < minSwapSaving*mixCost(mv, keep) {
		return nil, false
	}
	counts := make([]int32, len(variants))
	twice := 0.0 // cost per hour of the replicas started, times their start-up
	for i, v := range variants {
		counts[i] = max(keep[i], target[i])
		if add := target[i] - keep[i]; add > 0 {
			twice += float64(add) * v.Cost * startupOf(v, next.Variants[v.Name], slo).Hours()
		}
	}
	if saving*hold.Hours() < swapPayback*twice {
		return nil, false
	}
	next.SwapAt = now
	next.SwapTo = map[string]int32{}
	found := map[string]int32{}
	for i, v := range variants {
		next.SwapTo[v.Name] = target[i]
		// The swapped-out replicas are no longer the fleet as found.
		found[v.Name] = min(next.Found[v.Name], target[i])
	}
	next.Found = found
	return counts, true
}

// completesSwap says whether releasing down to counts completes the swap
// to target: what remains is the target mix.
func completesSwap(variants []decision.Variant, counts []int32, target map[string]int32) bool {
	if target == nil {
		return false
	}
	for i, v := range variants {
		if counts[i] != target[v.Name] {
			return false
		}
	}
	return true
}

// proven says whether a variant's own replicas have been seen serving at
// least provenShare of its estimated rate per replica: only then is its
// fitted line trusted beyond a prior.
func proven(va VariantAnalysis) bool {
	return va.Observations > 0 && va.PeakLoad >= provenShare*va.Capacity.Rate
}
