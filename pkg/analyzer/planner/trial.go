package planner

import "github.com/wva-project/wva/pkg/decision"

// untriedPriceShare of its cost is what an order prices a replica of a
// variant never seen running at. Its rate is only the fair-price guess
// (fairPrice), which makes it exactly as cost-efficient as the proven
// variant, so at its full price the search never picks it and the plan
// never learns what it serves: a fleet that starts on L40S would stay on
// L40S where an H100 serves twice the requests per unit of cost. Only the
// choice is discounted; the rate covering the demand is the fair price,
// so the plan is no shorter for trying. Once a replica runs, the variant
// is priced in full and what it serves decides. Every share from 0.8 down
// to 0.5 orders the same fleets on the benchmark's workloads and their
// other seeds: what matters is that a replica is tried at all.
const untriedPriceShare = 2.0 / 3

// untried says whether a variant has no replica and has never been seen
// serving.
func untried(va VariantAnalysis) bool { return va.Observations == 0 && va.Current == 0 }

// untriedAtDiscount returns the variants an order searches: the untried
// ones at untriedPriceShare of their cost.
func untriedAtDiscount(mv []mixVariant, an []VariantAnalysis) []mixVariant {
	out := append([]mixVariant(nil), mv...)
	for i := range out {
		if untried(an[i]) {
			out[i].Cost *= untriedPriceShare
		}
	}
	return out
}

// fairPrice gives a variant not yet proven the rate per replica that makes
// it exactly as cost-efficient as the best-proven variant, or its own
// fitted rate where that is lower. The engine-args prior knows nothing of
// the accelerator's speed, and a line fitted from replicas seen only near
// idle extrapolates their intercept far (an H100 seen at 0.5 req/s was
// credited with 8.7 req/s where it serves 4): a variant ordered on a wrong
// guess costs a start-up delay to correct. The plan still tries it where
// its price makes it fit the mix better, and its replicas then prove it.
func fairPrice(variants []decision.Variant, caps map[string]ReplicaCapacity, an []VariantAnalysis) {
	ref := -1
	for i, va := range an {
		if va.Observations == 0 || variants[i].Cost <= 0 {
			continue
		}
		if ref < 0 || (proven(va) && !proven(an[ref])) || (proven(va) == proven(an[ref]) && va.Observations > an[ref].Observations) {
			ref = i
		}
	}
	if ref < 0 {
		return
	}
	unit := caps[variants[ref].Name].Rate / variants[ref].Cost
	for i, va := range an {
		if i == ref || variants[i].Cost <= 0 || proven(va) {
			continue
		}
		c := caps[variants[i].Name]
		fair := unit * variants[i].Cost
		if va.Observations > 0 && c.Rate <= fair {
			continue
		}
		c.Rate, c.Bound = fair, "fair-price-prior"
		if seen := va.PeakLoad / provenShare; va.Observations > 0 && seen > fair {
			// Its line is trusted as far as it was seen: a variant the
			// gateway never loads to half its fitted rate would stay at
			// the fair price, tied with the reference, and the mix
			// would follow the order the variants happened to run in.
			c.Rate, c.Bound = seen, "seen-load"
		}
		caps[variants[i].Name] = c
		an[i].Capacity = c
	}
}

// provenShare of its estimated rate per replica is the load one of a
// variant's replicas must have been seen serving before its fitted line is
// trusted above the fair price.
const provenShare = 0.5
