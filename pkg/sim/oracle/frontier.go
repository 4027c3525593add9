package oracle

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// Bounds of static-frontier: fleets up to this multiple of static-peak's
// cost, at most this many rows (a run stays a few seconds).
const (
	FrontierCostFactor = 1.5
	FrontierMaxRows    = 12
)

// FrontierFleet is one constant fleet of the static-frontier rows.
type FrontierFleet struct {
	Mix      []int32
	Cost     float64 // per hour
	Capacity float64 // requests/s at saturation
}

// StaticFrontier is the cheapest-mix frontier of constant fleets: every
// mix within [minReplicas, maxReplicas] costing at most maxCost, ranked by
// capacity (the sum over variants of replicas x the variant's measured
// throughput for the trace's mean request); a mix is kept when no mix that
// costs as much or less has as much capacity, i.e. each kept mix is the
// cheapest for its capacity level. Mixes of no capacity are left out.
// Costs increase strictly along the result; more than maxRows are thinned
// evenly along it, keeping the first and the last.
func StaticFrontier(sc *scenario.Scenario, stats trace.Stats, maxCost float64, maxRows int) []FrontierFleet {
	in := int32(math.Round(math.Max(1, stats.MeanInputTokens)))
	out := int32(math.Round(math.Max(1, stats.MeanOutputTokens)))
	capacity := make([]float64, len(sc.Variants))
	for v, spec := range sc.Variants {
		capacity[v] = fleet.ServerThroughput(spec.Server, in, out)
	}
	var all []FrontierFleet
	mix := make([]int32, len(sc.Variants))
	var walk func(v int, cost, c float64)
	walk = func(v int, cost, c float64) {
		if v == len(mix) {
			if c > 0 {
				all = append(all, FrontierFleet{Mix: append([]int32(nil), mix...), Cost: cost, Capacity: c})
			}
			return
		}
		spec := sc.Variants[v]
		for n := spec.MinReplicas; n <= spec.MaxReplicas; n++ {
			k := cost + float64(n)*spec.Cost
			if k > maxCost+1e-9 {
				break
			}
			mix[v] = n
			walk(v+1, k, c+float64(n)*capacity[v])
		}
	}
	walk(0, 0, 0)
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Cost != all[j].Cost {
			return all[i].Cost < all[j].Cost
		}
		return all[i].Capacity > all[j].Capacity
	})
	var front []FrontierFleet
	best := 0.0
	for _, m := range all {
		if m.Capacity > best*(1+1e-9) && (len(front) == 0 || m.Cost > front[len(front)-1].Cost) {
			front = append(front, m)
			best = m.Capacity
		}
	}
	if maxRows > 0 && len(front) > maxRows {
		thin := make([]FrontierFleet, 0, maxRows)
		for k := range maxRows {
			thin = append(thin, front[int(math.Round(float64(k)*float64(len(front)-1)/float64(maxRows-1)))])
		}
		front = thin
	}
	return front
}

// FrontierName is a static-frontier row's policy name:
// static:<n>x<variant>+<m>x<variant>, every variant in scenario order.
func FrontierName(sc *scenario.Scenario, mix []int32) string {
	parts := make([]string, len(mix))
	for v, n := range mix {
		parts[v] = fmt.Sprintf("%dx%s", n, sc.Variants[v].Name)
	}
	return "static:" + strings.Join(parts, "+")
}

// IsFrontierRow says whether a report row is one of static-frontier's.
func IsFrontierRow(policy string) bool { return strings.HasPrefix(policy, "static:") }
