package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// A variant seen only near idle is credited at most the fair price of the
// proven one (same rate per unit of cost); seen at more than half that, its
// line is trusted up to twice the load seen; once seen at half its own
// line's rate, the line counts.
func TestUnprovenVariantAtFairPrice(t *testing.T) {
	cases := []struct {
		name     string
		h100Load float64 // req/s per H100 replica while learning
		bound    string
	}{
		{"seen near idle", 0.2, "fair-price-prior"},
		{"seen at over half the fair price", 8, "seen-load"},
		{"seen under load", 20, ""}, // its own line's bound
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			var an Analysis
			for i := range 10 {
				g := fleet(2, 1, 12)
				g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
				g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
					NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
					ArrivalRate: tc.h100Load, AvgITLms: 20 + tc.h100Load, AvgTTFTms: 200})
				an, _, st = run(t, g, st)
			}
			l4, h100 := an.Variants[1], an.Variants[0]
			require.Equal(t, "l4", l4.Name)
			require.GreaterOrEqual(t, l4.PeakLoad, provenShare*l4.Capacity.Rate, "the L4 is proven: %+v", l4)
			fair := l4.Capacity.Rate / 5 * 15
			if tc.bound != "" {
				require.Equal(t, tc.bound, h100.Capacity.Bound, "%+v", h100)
			}
			switch tc.bound {
			case "fair-price-prior":
				assert.InDelta(t, fair, h100.Capacity.Rate, 1e-9)
			case "seen-load":
				assert.Greater(t, tc.h100Load/provenShare, fair, "the fixture's load is over half the fair price")
				assert.InDelta(t, tc.h100Load/provenShare, h100.Capacity.Rate, 1e-9)
			default:
				assert.NotContains(t, []string{"fair-price-prior", "seen-load"}, h100.Capacity.Bound)
				assert.GreaterOrEqual(t, h100.PeakLoad, provenShare*h100.Capacity.Rate, "%+v", h100)
			}
		})
	}
}

// An order tries a variant never seen running when it is within
// untriedPriceShare of the cheapest mix, and covers the plan at the fair
// price whether it tries it or not; a variant seen running before is
// priced in full.
func TestOrderTriesUntriedVariant(t *testing.T) {
	learnt := func(h100Seen bool) any {
		var st any
		for i := range 10 {
			g := fleet(2, 0, 4)
			if h100Seen {
				g = fleet(2, 1, 4)
				g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
					NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
					ArrivalRate: 0.2, AvgITLms: 20, AvgTTFTms: 200})
			}
			g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
			_, _, st = run(t, g, st)
		}
		return st
	}
	order := func(st any, rate float64) (Analysis, decision.Signal, float64) {
		g := fleet(2, 0, rate)
		g.Now = t0.Add(5 * time.Minute)
		an, sig, _ := run(t, g, st)
		return an, sig, maxSupply(g.Variants, an)
	}
	untried, seen := learnt(false), learnt(true)
	tried := 0
	for rate := 4.0; rate <= 30; rate += 0.5 {
		an, sig, most := order(untried, rate)
		seenAn, seenSig, _ := order(seen, rate)
		require.Equal(t, "fair-price-prior", an.Variants[0].Capacity.Bound, "rate %.1f", rate)
		require.Equal(t, "fair-price-prior", seenAn.Variants[0].Capacity.Bound, "rate %.1f", rate)
		assert.Empty(t, seenAn.Trying, "rate %.1f: a variant seen running is priced in full", rate)
		if an.Why == WhyHorizon || an.PlanSupply <= an.Supply {
			continue // no order
		}
		assert.GreaterOrEqual(t, an.PlanSupply+1e-9, min(an.Staffed, most), "rate %.1f: the order covers the plan at the fair price: %s", rate, sig.Reason)
		if sig.PlannedReplicas["h100"] > 0 && seenSig.PlannedReplicas["h100"] == 0 {
			tried++
			assert.Equal(t, []string{"h100"}, an.Trying, "rate %.1f", rate)
			assert.Contains(t, sig.Reason, "trying h100 (never seen running", "rate %.1f", rate)
		}
	}
	assert.Positive(t, tried, "at some rate the untried H100 is ordered where the one seen running is not")
}

// maxSupply is the supply of every variant at its maximum, at the rates
// the analysis credits.
func maxSupply(variants []decision.Variant, an Analysis) float64 {
	caps := map[string]float64{}
	for _, v := range an.Variants {
		caps[v.Name] = v.Capacity.Rate
	}
	supply := 0.0
	for _, v := range variants {
		supply += float64(v.MaxReplicas) * caps[v.Name]
	}
	return supply
}
