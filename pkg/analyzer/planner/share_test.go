package planner

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// The calibrated fleet's figures: an L40S line of 6 req/s, an H100 line of
// 12.7, and the gateway sending an L40S replica 0.78 of an H100 replica's
// load.
func gatewayFleet() (l40s, h100 mixVariant) {
	w := math.Sqrt(0.78) // weights over their geometric mean
	l40s = mixVariant{Name: "l40s", Cost: 16, Rate: 6, Min: 1, Max: 24, Hi: 24}
	h100 = mixVariant{Name: "h100", Cost: 20, Rate: 12.7, Min: 0, Max: 12, Hi: 12}
	l40s.Load, h100.Load = w/6, 1/w/12.7
	return l40s, h100
}

func TestMixSupplyUnderTheGatewaySplit(t *testing.T) {
	l40s, h100 := gatewayFleet()
	plainL, plainH := l40s, h100
	plainL.Load, plainH.Load = 0, 0
	cases := []struct {
		name   string
		vs     []mixVariant
		counts []int32
		want   float64
	}{
		{"no weights learned: the lines add up", []mixVariant{plainL, plainH}, []int32{1, 2}, 6 + 2*12.7},
		{"one variant alone serves at its line", []mixVariant{l40s, h100}, []int32{0, 3}, 3 * 12.7},
		// Weights 0.78 and 1: D = (sum n w)^2 / sum(n w^2 / rate).
		{"an L40S beside two H100s", []mixVariant{l40s, h100}, []int32{1, 2}, math.Pow(0.78+2, 2) / (0.78*0.78/6 + 2/12.7)},
		{"more L40S", []mixVariant{l40s, h100}, []int32{3, 2}, math.Pow(3*0.78+2, 2) / (3*0.78*0.78/6 + 2/12.7)},
		{"nothing runs", []mixVariant{l40s, h100}, []int32{0, 0}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, mixSupply(tc.vs, tc.counts), 1e-9)
		})
	}
	// An L40S added to three H100s adds less than its line: the gateway
	// loads it past its line, and the H100s under theirs.
	added := mixSupply([]mixVariant{l40s, h100}, []int32{1, 3}) - mixSupply([]mixVariant{l40s, h100}, []int32{0, 3})
	assert.Greater(t, added, 0.0)
	assert.Less(t, added, 6.0)
}

// The exact search finds the cheapest mix whose supply under the split
// covers the need, whatever the variants' order and load factors: checked
// against enumerating every mix.
func TestCheapestMixUnderTheGatewaySplit(t *testing.T) {
	l40s, h100 := gatewayFleet()
	// One L40S must run: at 30 req/s the lines say 1 L40S + 2 H100 (6 +
	// 25.4 = 31.4, cost 56); under the split that mix serves 29.9, and
	// the cheapest that covers 30 is 2 L40S + 2 H100 (35.2, cost 72).
	l40s.Lo = 1
	got, ok := cheapestMix([]mixVariant{l40s, h100}, 30)
	assert.True(t, ok)
	assert.Equal(t, []int32{2, 2}, got)
	plainL, plainH := l40s, h100
	plainL.Load, plainH.Load = 0, 0
	got, _ = cheapestMix([]mixVariant{plainL, plainH}, 30)
	assert.Equal(t, []int32{1, 2}, got)

	rng := rand.New(rand.NewSource(1))
	for trial := range 300 {
		vs := make([]mixVariant, 2+rng.Intn(2))
		for i := range vs {
			hi := int32(1 + rng.Intn(5))
			vs[i] = mixVariant{Cost: float64(1 + rng.Intn(20)), Rate: 0.5 + 10*rng.Float64(), Load: 0.5 + rng.Float64(), Hi: hi, Max: hi}
			vs[i].Lo = int32(rng.Intn(int(hi) + 1))
		}
		need := 30 * rng.Float64()
		got, ok := cheapestMix(vs, need)
		best, bestOK := bruteMix(vs, need)
		assert.Equal(t, bestOK, ok, "trial %d", trial)
		if ok {
			assert.GreaterOrEqual(t, mixSupply(vs, got)+1e-9, need, "trial %d covers", trial)
			assert.InDelta(t, best, mixCost(vs, got), 1e-9, "trial %d is the cheapest", trial)
		}
		// The greedy fallback (beyond maxMixCombinations) covers the
		// need when it says so, never cheaper than the exact search.
		if g, gok := greedyMix(vs, need); gok {
			assert.GreaterOrEqual(t, mixSupply(vs, g)+1e-9, need, "trial %d: greedy covers", trial)
			assert.True(t, ok, "trial %d: greedy found a mix the exact search missed", trial)
			assert.GreaterOrEqual(t, mixCost(vs, g)+1e-9, best, "trial %d: greedy never cheaper", trial)
		}
	}
}

// bruteMix is the cost of the cheapest mix within [Lo, Hi] whose supply
// covers need, with at least one replica.
func bruteMix(vs []mixVariant, need float64) (float64, bool) {
	best, found := math.Inf(1), false
	counts := make([]int32, len(vs))
	var walk func(i int)
	walk = func(i int) {
		if i == len(vs) {
			n := int32(0)
			for _, c := range counts {
				n += c
			}
			if n > 0 && mixSupply(vs, counts)+1e-9 >= need {
				best, found = min(best, mixCost(vs, counts)), true
			}
			return
		}
		for c := vs[i].Lo; c <= vs[i].Hi; c++ {
			counts[i] = c
			walk(i + 1)
		}
	}
	walk(0)
	return best, found
}

func TestObserveSharesLearnsTheGatewaysWeights(t *testing.T) {
	now := t0.Add(time.Hour)
	variants := []decision.Variant{{Name: "l40s"}, {Name: "h100"}}
	rep := func(v string, rate float64, ready time.Time) decision.ReplicaMetrics {
		return decision.ReplicaMetrics{Variant: v, ArrivalRate: rate, ReadyAt: ready}
	}
	old := now.Add(-10 * time.Minute)
	cases := []struct {
		name   string
		reps   []decision.ReplicaMetrics
		settle int // the L40S's settling cycles left
		want   float64
	}{
		{"both serve", []decision.ReplicaMetrics{rep("l40s", 4, old), rep("h100", 5, old), rep("h100", 5.2, old)}, 0, 4 / 5.1},
		{"one variant alone", []decision.ReplicaMetrics{rep("h100", 5, old), rep("h100", 5.2, old)}, 0, 0},
		{"a replica Ready for less than a window is skipped", []decision.ReplicaMetrics{rep("l40s", 4, old), rep("l40s", 0.5, now.Add(-20*time.Second)), rep("h100", 5.1, old)}, 0, 4 / 5.1},
		{"a settling variant is skipped", []decision.ReplicaMetrics{rep("l40s", 4, old), rep("h100", 5.1, old)}, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			states := map[string]VariantState{"l40s": {Settle: tc.settle}}
			observeShares(variants, tc.reps, states, now)
			l, h := states["l40s"].Weight, states["h100"].Weight
			if tc.want == 0 {
				assert.Zero(t, l)
				assert.Zero(t, h)
				return
			}
			assert.InDelta(t, tc.want, l/h, 1e-9)
			assert.InDelta(t, 1, l*h, 1e-9, "weights over their geometric mean")
		})
	}
	// The weights move toward new observations by shareMemory.
	states := map[string]VariantState{"l40s": {Weight: 1}, "h100": {Weight: 1}}
	observeShares(variants, []decision.ReplicaMetrics{rep("l40s", 4, old), rep("h100", 4*1.21, old)}, states, now)
	assert.InDelta(t, 0.9+0.1/1.1, states["l40s"].Weight, 1e-9)

	// Load factors: weight over the line, over their geometric mean.
	caps := map[string]ReplicaCapacity{"l40s": {Rate: 6}, "h100": {Rate: 12.7}}
	f := loadFactors(variants, caps, map[string]VariantState{"l40s": {Weight: math.Sqrt(0.78)}, "h100": {Weight: 1 / math.Sqrt(0.78)}})
	assert.InDelta(t, 0.78*12.7/6, f[0]/f[1], 1e-9)
	assert.InDelta(t, 1, f[0]*f[1], 1e-9)
	assert.Equal(t, []float64{1, 1}, loadFactors(variants, caps, nil), "nothing learned: the lines add up")
}

// A group whose gateway sends each replica the same load, whatever its
// speed, is credited the request-averaged supply of its mix, not the sum
// of its lines, and orders for the difference.
func TestPlanCountsTheGatewaysSplit(t *testing.T) {
	var st any
	var an Analysis
	for i := range 12 {
		g := fleet(2, 1, 12) // two L4s at 4 req/s each
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
			NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
			ArrivalRate: 4, AvgITLms: 24, AvgTTFTms: 200})
		an, _, st = run(t, g, st)
	}
	h100, l4 := an.Variants[0], an.Variants[1]
	require.Equal(t, "l4", l4.Name)
	require.Greater(t, h100.Capacity.Rate, l4.Capacity.Rate)
	assert.Greater(t, l4.Load, 1.0, "the L4s are loaded past their lines' share")
	assert.Less(t, h100.Load, 1.0)
	// Equal weights: D = 3^2 / (2/rate_l4 + 1/rate_h100).
	sum := 2*l4.Capacity.Rate + h100.Capacity.Rate
	want := 9 / (2/l4.Capacity.Rate + 1/h100.Capacity.Rate)
	assert.InDelta(t, want, an.Supply, 1e-6*want)
	assert.Less(t, an.Supply, 0.9*sum)

	// The same fleet with the load split by the lines is credited their
	// sum.
	st, an = nil, Analysis{}
	for i := range 12 {
		g := fleet(2, 1, 12)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		for j := range g.Replicas {
			g.Replicas[j].ArrivalRate = 4 * l4.Capacity.Rate / h100.Capacity.Rate
		}
		g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
			NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
			ArrivalRate: 4, AvgITLms: 24, AvgTTFTms: 200})
		an, _, st = run(t, g, st)
	}
	l4b, h100b := an.Variants[1], an.Variants[0]
	sum = 2*l4b.Capacity.Rate + h100b.Capacity.Rate
	assert.InDelta(t, sum, an.Supply, 0.03*sum, "loads %.3f and %.3f", l4b.Load, h100b.Load)
}

// A release may not give back replicas of a variant the gateway loads
// less and so pile requests on the one it loads past its line, beyond
// where that variant's mean ITL reaches the target (1/itlHeadroom of its
// line), or further than the fleet runs it now; giving back the busiest
// variant's own replicas is always allowed. Checked against the
// exhaustive search.
func TestReleaseKeepsTheBusiestVariantWithinTarget(t *testing.T) {
	l40s, h100 := gatewayFleet()
	vs := []mixVariant{l40s, h100}
	const d = 35 // req/s: 2 L40S + 4 H100 run the L40S at 0.82 of its line
	cases := []struct {
		name   string
		counts []int32 // l40s, h100: the fleet now
		mix    []int32
		want   bool
	}{
		{"an H100 given back past the target", []int32{2, 4}, []int32{1, 3}, false},
		{"only an L40S given back", []int32{2, 4}, []int32{1, 4}, true},
		{"an H100 given back within the target", []int32{2, 4}, []int32{2, 3}, true},
		{"every L40S given back", []int32{2, 4}, []int32{0, 3}, true},
		{"two H100s given back past the target", []int32{2, 4}, []int32{2, 2}, false},
		{"already past it: no further", []int32{2, 2}, []int32{2, 1}, false},
		{"already past it: an L40S given back", []int32{2, 2}, []int32{1, 2}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, keepsBusiestWithinTarget(vs, tc.counts, d)(tc.mix))
		})
	}

	// The release search: the cheapest mix within the fleet now that
	// covers the need and that the bound accepts.
	now := []int32{2, 4}
	rel := []mixVariant{l40s, h100}
	for i := range rel {
		rel[i].Lo, rel[i].Hi = rel[i].Min, now[i]
	}
	accept := keepsBusiestWithinTarget(rel, now, d)
	free, _ := cheapestMix(rel, 30)
	require.False(t, accept(free), "the fixture's cheapest release (%v) piles requests on the L40S", free)
	got, ok := cheapestMixWhere(rel, 30, accept)
	require.True(t, ok)
	assert.True(t, accept(got), "%v", got)
	assert.GreaterOrEqual(t, mixSupply(rel, got)+1e-9, 30.0)
	assert.Less(t, mixCost(rel, got), mixCost(rel, now), "still a release: %v", got)
	for l := rel[0].Lo; l <= rel[0].Hi; l++ {
		for h := rel[1].Lo; h <= rel[1].Hi; h++ {
			m := []int32{l, h}
			if l+h > 0 && accept(m) && mixSupply(rel, m)+1e-9 >= 30 {
				assert.GreaterOrEqual(t, mixCost(rel, m)+1e-9, mixCost(rel, got), "%v is accepted and cheaper than %v", m, got)
			}
		}
	}
}
