package planner

import "math"

// mixVariant is one variant as the mix search sees it.
type mixVariant struct {
	Name string
	Cost float64
	Rate float64 // requests per second one replica serves at the SLO
	// Load is the variant's load factor under the gateway's split
	// (loadFactors; 0 counts as 1).
	Load     float64
	Min, Max int32
	// Lo and Hi bound this search (within Min..Max): a scale-up only adds
	// and a scale-down only removes, so the fleet never swaps variants
	// back and forth.
	Lo, Hi int32
}

// maxMixCombinations bounds the exact search; beyond it the search fills
// greedily by cost per unit of rate (never reached with a handful of
// variants).
const maxMixCombinations = 2_000_000

// cheapestMix returns the counts (in vs order) of the cheapest mix within
// [Lo, Hi] whose rate covers need, with at least one replica in all; ok is
// false when even every variant at Hi falls short (the counts are then Hi).
// Ties go to the mix with more rate, then to fewer replicas.
func cheapestMix(vs []mixVariant, need float64) (counts []int32, ok bool) {
	return cheapestMixWhere(vs, need, nil)
}

// cheapestMixWhere is cheapestMix among the mixes accept allows (every
// mix when nil; the greedy fallback, never reached with a handful of
// variants, does not apply it).
func cheapestMixWhere(vs []mixVariant, need float64, accept func([]int32) bool) (counts []int32, ok bool) {
	combos := 1.0
	for _, v := range vs {
		combos *= float64(v.Hi-v.Lo) + 1
	}
	if combos > maxMixCombinations {
		return greedyMix(vs, need)
	}
	// With equal load factors the supply is the sum of the rates, and
	// once it covers need more of the variant at hand only costs more;
	// otherwise a variant added later may lower it (mixSupply).
	uniform := true
	for _, v := range vs {
		uniform = uniform && v.factor() == vs[0].factor()
	}
	best := make([]int32, len(vs))
	cur := make([]int32, len(vs))
	bestCost, bestRate := math.Inf(1), 0.0
	found := false
	var walk func(i int, cost, s1, s2 float64, n int32)
	walk = func(i int, cost, s1, s2 float64, n int32) {
		if cost > bestCost+1e-9 {
			return
		}
		if i == len(vs) {
			if n == 0 || s1*s1/s2+1e-9 < need || (accept != nil && !accept(cur)) {
				return
			}
			if rate := s1 * s1 / s2; cost < bestCost-1e-9 || rate > bestRate+1e-9 {
				bestCost, bestRate, found = cost, rate, true
				copy(best, cur)
			}
			return
		}
		v := vs[i]
		for c := v.Lo; c <= v.Hi; c++ {
			cur[i] = c
			a, b := s1+float64(c)*v.Rate*v.factor(), s2+float64(c)*v.Rate*v.factor()*v.factor()
			walk(i+1, cost+float64(c)*v.Cost, a, b, n+c)
			if uniform && b > 0 && a*a/b >= need+1e-9 && float64(c)*v.Cost > 0 {
				// More of this variant only costs more.
				break
			}
		}
		cur[i] = v.Lo
	}
	walk(0, 0, 0, 0, 0)
	if !found {
		for i, v := range vs {
			best[i] = v.Hi
		}
		return best, false
	}
	return best, true
}

// orderMix is what a scale-up orders: every replica that runs (Lo) is
// kept, and the replicas the cheapest mix covering need over each
// variant's whole range (Min up to Hi) has beyond them are added. The
// cheapest addition on its own would grow whichever variant costs least
// per replica, not per request, and once added, a replica stays for the
// hold: a fleet short of half a replica's rate again and again would
// fill with the variant that serves least for its cost. Adding toward
// the cheapest whole mix instead lets the scale-down give back, once the
// new replicas serve, what that mix does not need. ok is false when even
// every variant at Hi falls short (the counts are then Hi).
func orderMix(vs []mixVariant, need float64) (counts []int32, ok bool) {
	whole := append([]mixVariant(nil), vs...)
	for i := range whole {
		whole[i].Lo = min(whole[i].Min, whole[i].Hi)
	}
	target, ok := cheapestMix(whole, need)
	if !ok {
		return target, false
	}
	counts = make([]int32, len(vs))
	for i, v := range vs {
		counts[i] = max(v.Lo, target[i])
	}
	return counts, true
}

// greedyMix fills from Lo, each step adding the replica that raises the
// mix's supply most for its cost.
func greedyMix(vs []mixVariant, need float64) ([]int32, bool) {
	counts := make([]int32, len(vs))
	for i, v := range vs {
		counts[i] = v.Lo
	}
	for rate := mixSupply(vs, counts); rate < need; rate = mixSupply(vs, counts) {
		best, bestGain := -1, 0.0
		for i, v := range vs {
			if counts[i] >= v.Hi || v.Rate <= 0 || v.Cost <= 0 {
				continue
			}
			counts[i]++
			if gain := (mixSupply(vs, counts) - rate) / v.Cost; best < 0 || gain > bestGain {
				best, bestGain = i, gain
			}
			counts[i]--
		}
		if best < 0 {
			return counts, false
		}
		counts[best]++
	}
	return counts, true
}

// busiestLoad is the load of the mix's busiest variant under the
// gateway's split relative to its line at group load d (d x f / sum(n x
// rate x f)), and that variant's load factor.
func busiestLoad(vs []mixVariant, counts []int32, d float64) (load, factor float64) {
	s1, _, factor := splitSums(vs, counts)
	if s1 <= 0 {
		return math.Inf(1), factor
	}
	return d * factor / s1, factor
}
