package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// A steady fleet moves to a cheaper mix only when the move pays, toward
// variants proven by their own replicas, and at most once per hold.
func TestSwapMix(t *testing.T) {
	// l4: 2 req/s for 5 (2.5 per req/s); h100: 4 req/s for 15 (3.75).
	variants := []decision.Variant{
		{Name: "h100", Cost: 15, MinReplicas: 0, MaxReplicas: 8, StartupDelay: 3 * time.Minute},
		{Name: "l4", Cost: 5, MinReplicas: 1, MaxReplicas: 20, StartupDelay: 2 * time.Minute},
	}
	caps := map[string]ReplicaCapacity{"h100": {Rate: 4}, "l4": {Rate: 2}}
	provenBoth := []VariantAnalysis{{Name: "h100", Observations: 10, PeakLoad: 3}, {Name: "l4", Observations: 10, PeakLoad: 2}}
	l4Unproven := []VariantAnalysis{{Name: "h100", Observations: 10, PeakLoad: 3}, {Name: "l4"}}
	const hold = 36 * time.Minute
	cases := []struct {
		name   string
		an     []VariantAnalysis
		keep   []int32 // h100, l4
		need   float64
		hold   time.Duration
		swapAt time.Duration // before now; 0: never swapped
		young  bool
		found  map[string]int32
		want   []int32 // nil: no swap
		target map[string]int32
		l4Cost float64   // 0: 5
		shares []float64 // h100, l4: share of requests over the ITL target; nil: none known
		settle string    // a variant whose replicas just became ready
	}{
		{name: "dear variant replaced by the cheap one", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold,
			want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
		{name: "already the cheapest mix", an: provenBoth, keep: []int32{0, 5}, need: 9, hold: hold},
		{name: "never toward a variant not proven", an: l4Unproven, keep: []int32{2, 1}, need: 9, hold: hold},
		// 4 l4 at 7.2 cost 28.8 where 2 h100 cost 30: a 4% saving.
		{name: "saving under 5% of the fleet's cost", an: provenBoth, keep: []int32{2, 0}, need: 7.6, hold: hold, l4Cost: 7.2},
		// Saving 10/h over 6 min is 1; starting 4 l4 for 2 min costs
		// 0.67, which the saving must repay twice.
		{name: "saving within the hold does not repay the start-up twice", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: 6 * time.Minute},
		{name: "once per hold", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold, swapAt: 20 * time.Minute},
		{name: "a hold after the last swap", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold, swapAt: 40 * time.Minute,
			want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
		{name: "not away from replicas that settle", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold, settle: "h100"},
		{name: "while the variant it adds settles", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold, settle: "l4",
			want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
		{name: "young fleet: the new mix covers the capacity found", an: provenBoth, keep: []int32{2, 1}, need: 3, hold: hold,
			young: true, found: map[string]int32{"h100": 2, "l4": 1},
			want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
		{name: "never toward a variant missing the ITL target while the other meets it", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold,
			shares: []float64{0.002, 0.08}},
		{name: "toward it when both meet the target", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold,
			shares: []float64{0.002, 0.008}, want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
		{name: "toward it when both miss it", an: provenBoth, keep: []int32{2, 1}, need: 9, hold: hold,
			shares: []float64{0.06, 0.08}, want: []int32{2, 5}, target: map[string]int32{"h100": 0, "l4": 5}},
	}
	now := t0.Add(time.Hour)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := &State{Variants: map[string]VariantState{}, Found: tc.found}
			if tc.settle != "" {
				next.Variants[tc.settle] = VariantState{Settle: settleCycles}
			}
			if tc.swapAt > 0 {
				next.SwapAt = now.Add(-tc.swapAt)
			}
			variants := append([]decision.Variant(nil), variants...)
			if tc.l4Cost > 0 {
				variants[1].Cost = tc.l4Cost
			}
			an := append([]VariantAnalysis(nil), tc.an...)
			base := make([]mixVariant, len(variants))
			for i, v := range variants {
				an[i].Capacity = caps[v.Name]
				base[i] = mixVariant{Name: v.Name, Cost: v.Cost, Rate: caps[v.Name].Rate, Min: v.MinReplicas, Max: v.MaxReplicas}
			}
			got, ok := swapMix(variants, an, base, tc.keep, tc.need, tc.hold, tc.young, tc.shares, nil, params.DefaultSLO(), next, now)
			if tc.want == nil {
				assert.False(t, ok, "no swap, got %v", got)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tc.want, got, "the cheaper mix's replicas are added, none removed yet")
			assert.Equal(t, tc.target, next.SwapTo)
			assert.Equal(t, now, next.SwapAt)
			if tc.young {
				assert.Equal(t, int32(0), next.Found["h100"], "the swapped-out variant is no longer protected as found")
			}
			assert.True(t, completesSwap(variants, []int32{tc.target["h100"], tc.target["l4"]}, next.SwapTo))
			assert.False(t, completesSwap(variants, got, next.SwapTo))
		})
	}
}
