package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// The gateway does not split the load by what each variant can serve at
// the SLO. Its endpoint picker balances the free KV cache and the queues,
// so a replica gets load in proportion to its KV cache more than to its
// speed: on the calibrated fleet an L40S replica (more cache, half the
// H100's speed) is sent 0.78 of an H100 replica's requests where its line
// is 0.47 of the H100's, and it misses the ITL target while the H100s
// beside it run at a third of theirs. Summing the lines credits such a mix
// with load it cannot serve; its supply is instead the group load at which
// its requests are, on average, at their replicas' lines (mixSupply): a
// variant loaded past its line costs in proportion to the requests it
// carries.
//
// Each variant's gateway weight (its replicas' load relative to the other
// variants' replicas) is learned from the per-replica arrival rates while
// two or more variants serve: Weight is its load per replica over the
// geometric mean of the serving variants' loads, so it does not depend on
// how many replicas of each run. A variant never seen beside another is
// assumed loaded at its line's share, as before anything is learned.

// shareMemory is the weight of one observation in the learned gateway
// weight: about ten cycles (five minutes at a 30 s engine interval)
// average out a rate window's Poisson noise.
const shareMemory = 0.1

// observeShares updates the gateway weight of each variant serving beside
// another from this cycle's per-replica arrival rates. Replicas Ready for
// less than a rate window under-read their load and are skipped, as are
// variants still settling.
func observeShares(variants []decision.Variant, reps []decision.ReplicaMetrics, states map[string]VariantState, now time.Time) {
	loads := map[string]float64{}
	n := map[string]int{}
	for _, r := range reps {
		if !decision.Finite(r.ArrivalRate) || r.ArrivalRate < 0 {
			continue
		}
		if !r.ReadyAt.IsZero() && now.Sub(r.ReadyAt) < decision.RateWindow {
			continue
		}
		loads[r.Variant] += r.ArrivalRate
		n[r.Variant]++
	}
	logMean, serving := 0.0, 0
	for _, v := range variants {
		if n[v.Name] == 0 || states[v.Name].Settle > 0 || loads[v.Name] <= 0 {
			delete(n, v.Name)
			continue
		}
		loads[v.Name] /= float64(n[v.Name])
		logMean += math.Log(loads[v.Name])
		serving++
	}
	if serving < 2 {
		return
	}
	logMean /= float64(serving)
	for _, v := range variants {
		if n[v.Name] == 0 {
			continue
		}
		w := loads[v.Name] / math.Exp(logMean)
		vs := states[v.Name]
		if vs.Weight > 0 {
			w = (1-shareMemory)*vs.Weight + shareMemory*w
		}
		vs.Weight = w
		states[v.Name] = vs
	}
}

// loadFactors is each variant's load relative to its line's share of a
// mix (its gateway weight over its rate per replica, over the geometric
// mean of the variants' factors): a variant at a higher factor reaches its
// line at a lower group load. A variant with no learned weight gets the
// mean, 1, as every variant does when none has one.
func loadFactors(variants []decision.Variant, caps map[string]ReplicaCapacity, states map[string]VariantState) []float64 {
	f := make([]float64, len(variants))
	logSum, known := 0.0, 0
	for i, v := range variants {
		if w, r := states[v.Name].Weight, caps[v.Name].Rate; w > 0 && r > 0 {
			f[i] = w / r
			logSum += math.Log(f[i])
			known++
		}
	}
	mean := 1.0
	if known > 0 {
		mean = math.Exp(logSum / float64(known))
	}
	for i := range f {
		f[i] /= mean
		if f[i] == 0 {
			f[i] = 1
		}
	}
	return f
}

// mixSupply is the group load a mix serves at the SLO under the gateway's
// split: where its requests are, on average, at their replicas' lines. A
// variant's replicas are loaded at D x f / W of their line (f its load
// factor, W the mix's sum of rate x f), and carry n x rate x f / W of the
// requests; averaged over the requests that is 1 at D = W^2 / sum(n x
// rate x f^2). With every factor equal it is the sum of the lines; a
// variant the gateway loads past its line costs in proportion to the
// requests it carries, not the whole fleet's supply: an L40S beside three
// H100s carries a fifth of them.
func mixSupply(vs []mixVariant, counts []int32) float64 {
	s1, s2, _ := splitSums(vs, counts)
	if s2 == 0 {
		return 0
	}
	return s1 * s1 / s2
}

// splitSums are a mix's sums under the gateway's split, s1 = sum(n x rate
// x f) and s2 = sum(n x rate x f^2) over the variants it runs, and the
// largest load factor f among them (its busiest variant's).
func splitSums(vs []mixVariant, counts []int32) (s1, s2, busiest float64) {
	for i, v := range vs {
		if counts[i] > 0 {
			s1 += float64(counts[i]) * v.Rate * v.factor()
			s2 += float64(counts[i]) * v.Rate * v.factor() * v.factor()
			busiest = max(busiest, v.factor())
		}
	}
	return s1, s2, busiest
}

// supplyOf is the group load counts (in c.variants' order) serve at the
// SLO under the gateway's split.
func (c *cycle) supplyOf(counts []int32) float64 {
	return mixSupply(c.mixVariants(), counts)
}

// mixVariants is the group's variants as the mix search sees them, each
// bounded by its minimum and maximum replicas (Lo and Hi are set by the
// search that uses them).
func (c *cycle) mixVariants() []mixVariant {
	mv := make([]mixVariant, len(c.variants))
	for i, v := range c.variants {
		mv[i] = mixVariant{Name: v.Name, Cost: v.Cost, Rate: c.caps[v.Name].Rate, Load: c.loads[i], Min: v.MinReplicas, Max: v.MaxReplicas,
			Lo: min(max(v.CurrentReplicas, v.MinReplicas), v.MaxReplicas), Hi: v.MaxReplicas}
	}
	return mv
}

// factor is the variant's load factor, 1 when unset.
func (v mixVariant) factor() float64 {
	if v.Load > 0 {
		return v.Load
	}
	return 1
}
