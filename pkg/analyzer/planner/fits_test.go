package planner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// The variant kept for the requests the running ones miss the TTFT
// target on: one that misses clearly fewer, or one never run; none while
// the running ones are within the budget or nothing misses fewer.
func TestHoldsTheRest(t *testing.T) {
	slo := params.Defaults().SLO // 99%: the TTFT's part of the budget is 0.5%
	pool := func(share float64) VariantState {
		return VariantState{TTFTPool: Pool{Requests: 1000, Over: 1000 * share}}
	}
	cases := []struct {
		name string
		l40s VariantState
		h100 VariantState
		kept string
		want string
	}{
		{name: "the L40S misses 4.3%, the H100 2.0%", l40s: pool(0.043), h100: pool(0.020), want: "h100"},
		{name: "the H100 misses about as many", l40s: pool(0.043), h100: pool(0.035), want: ""},
		{name: "kept while it misses fewer", l40s: pool(0.043), h100: pool(0.035), kept: "h100", want: "h100"},
		{name: "the L40S within the budget", l40s: pool(0.004), h100: pool(0.001), want: ""},
		// 11 misses in 1000 where 5 are expected: over, not clearly.
		{name: "the L40S over the budget, not clearly", l40s: pool(0.011), h100: pool(0.001), want: ""},
		{name: "kept while the L40S is over the budget", l40s: pool(0.011), h100: pool(0.001), kept: "h100", want: "h100"},
		{name: "released once the L40S is within it", l40s: pool(0.004), h100: pool(0.001), kept: "h100", want: ""},
		{name: "too few requests to read", l40s: VariantState{TTFTPool: Pool{Requests: 100, Over: 10}}, want: ""},
		{name: "an H100 never run is tried", l40s: pool(0.043), want: "h100"},
		{name: "an H100 run too briefly to read is tried again", l40s: pool(0.043), h100: VariantState{TTFTPool: Pool{Requests: 100}}, want: "h100"},
		{name: "kept until its own requests can be read", l40s: pool(0.043), h100: VariantState{TTFTPool: Pool{Requests: 150}}, kept: "h100", want: "h100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			variants := []decision.Variant{
				{Name: "h100", MaxReplicas: 8},
				{Name: "l40s", MaxReplicas: 8, CurrentReplicas: 2},
			}
			learned := map[string]VariantState{"h100": tc.h100, "l40s": tc.l40s}
			got := ""
			if i := holdsTheRest(variants, learned, slo, tc.kept); i >= 0 {
				got = variants[i].Name
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// Requests pooled with decay; a cycle without any keeps the pool.
func TestTTFTPool(t *testing.T) {
	p := Pool{}.pool(100, 5)
	p = p.pool(0, 0)
	assert.Equal(t, Pool{Requests: 100, Over: 5}, p)
	p = p.pool(200, 2)
	assert.InDelta(t, 100*ttftPoolDecay+200, p.Requests, 1e-9)
	share, ok := p.share()
	require.True(t, ok)
	assert.InDelta(t, (5*ttftPoolDecay+2)/(100*ttftPoolDecay+200), share, 1e-9)
}

// A group of L4s missing the TTFT target on 5% of their requests keeps
// an H100 it has never run: the plan orders one whatever the rates say.
func TestPlanKeepsAVariantThatHoldsTheRest(t *testing.T) {
	ttft := decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{1.8, 1.9, 2}} // 2 req/s, 5% over 2.5 s
	g := fleet(2, 0, 4)
	for i := range g.Replicas {
		g.Replicas[i].TTFT = ttft
	}
	an, sig, _ := run(t, g, nil)
	assert.Equal(t, "h100", an.HoldsTheRest)
	assert.GreaterOrEqual(t, sig.PlannedReplicas["h100"], int32(1), sig.Reason)

	g = fleet(2, 0, 4)
	g.Now = t0.Add(30 * time.Second)
	_, calm, _ := run(t, g, nil)
	assert.Zero(t, calm.PlannedReplicas["h100"], "without the misses the L4s alone serve: %s", calm.Reason)
}

// Misses count from the first bucket bound at or above the target: a
// request in vLLM's (1 s, 2.5 s] bucket may have met a 2 s target.
func TestTTFTMissesCountWholeBuckets(t *testing.T) {
	reps := []decision.ReplicaMetrics{
		{Variant: "l40s", TTFT: decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{0.5, 0.9, 1}}},
		{Variant: "l40s", TTFT: decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{0.5, 0.9, 1}}},
		{Variant: "h100", TTFT: decision.Histogram{Bounds: []float64{1, 2.5, math.Inf(1)}, Counts: []float64{0, 0, 1}}},
	}
	requests, misses := ttftMisses("l40s", reps, 2000)
	assert.InDelta(t, 2*decision.RateWindow.Seconds(), requests, 1e-9)
	assert.InDelta(t, 0.1*requests, misses, 1e-9, "10% over 2.5 s; the 40% between 1 and 2.5 s are not counted")
	requests, misses = ttftMisses("l40s", reps, 2500)
	assert.InDelta(t, 0.1*requests, misses, 1e-9, "a target on a bound counts from it")
}

// The variants the mix adds none of: those whose requests miss the TTFT
// target clearly more than the kept variant's own, none while its own are
// unknown.
func TestMissingTTFT(t *testing.T) {
	pool := func(share float64) VariantState {
		return VariantState{TTFTPool: Pool{Requests: 1000, Over: 1000 * share}}
	}
	variants := []decision.Variant{{Name: "h100"}, {Name: "l40s"}, {Name: "l4"}}
	cases := []struct {
		name    string
		learned map[string]VariantState
		kept    string
		want    []int
	}{
		{name: "both miss clearly more", learned: map[string]VariantState{"h100": pool(0.02), "l40s": pool(0.043), "l4": pool(0.05)}, kept: "h100", want: []int{1, 2}},
		{name: "one misses about as many", learned: map[string]VariantState{"h100": pool(0.02), "l40s": pool(0.025), "l4": pool(0.05)}, kept: "h100", want: []int{2}},
		{name: "one never read", learned: map[string]VariantState{"h100": pool(0.02), "l40s": pool(0.043)}, kept: "h100", want: []int{1}},
		{name: "the kept variant never run", learned: map[string]VariantState{"l40s": pool(0.043), "l4": pool(0.05)}, kept: "h100", want: nil},
		{name: "nothing kept", learned: map[string]VariantState{"h100": pool(0.02), "l40s": pool(0.043)}, kept: "", want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, missingTTFT(variants, tc.learned, tc.kept))
		})
	}
}

// A short fleet whose L4s miss the TTFT target on 5% of their requests
// and whose H100 misses 1% orders H100s, not the L4s the cheapest mix
// would add; once the H100s are at their maximum, L4s serve the rest.
func TestPlanAddsNoneOfAVariantMissingTTFT(t *testing.T) {
	st := func(l4, h100 float64) State {
		return State{Analyzer: Name, Variants: map[string]VariantState{
			"l4":   {TTFTPool: Pool{Requests: 1000, Over: 1000 * l4}},
			"h100": {TTFTPool: Pool{Requests: 1000, Over: 1000 * h100}},
		}}
	}
	cases := []struct {
		name           string
		l4, h100       float64 // shares of their requests over the TTFT target
		h100Max        int32
		wantL4, wantH1 func(int32) bool
	}{
		{name: "neither misses: the cheapest mix adds L4s", l4: 0, h100: 0, h100Max: 8,
			wantL4: func(n int32) bool { return n > 2 }, wantH1: func(n int32) bool { return n >= 1 }},
		{name: "the L4s miss: only H100s are added", l4: 0.05, h100: 0.01, h100Max: 8,
			wantL4: func(n int32) bool { return n == 2 }, wantH1: func(n int32) bool { return n > 1 }},
		{name: "the H100s at their maximum: L4s serve the rest", l4: 0.05, h100: 0.01, h100Max: 1,
			wantL4: func(n int32) bool { return n > 2 }, wantH1: func(n int32) bool { return n == 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := fleet(2, 1, 30)
			g.Variants[1].MaxReplicas = tc.h100Max
			an, sig, _ := run(t, g, st(tc.l4, tc.h100))
			assert.True(t, tc.wantL4(sig.PlannedReplicas["l4"]), "l4 %d: %s %v", sig.PlannedReplicas["l4"], sig.Reason, an.MissingTTFT)
			assert.True(t, tc.wantH1(sig.PlannedReplicas["h100"]), "h100 %d: %s", sig.PlannedReplicas["h100"], sig.Reason)
		})
	}
}
