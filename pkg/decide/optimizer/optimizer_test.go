package optimizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

type v = decision.Variant

func targetsOf(ts []decision.Target) map[string]int32 {
	out := map[string]int32{}
	for _, t := range ts {
		out[t.Variant] = t.Replicas
	}
	return out
}

func TestOptimizeGroup(t *testing.T) {
	up := decision.Signal{RequiredCapacity: 1, Reason: "saturation"}
	down := decision.Signal{SpareCapacity: 1, Reason: "spare"}
	cases := []struct {
		name     string
		variants []v
		signal   decision.Signal
		want     map[string]int32
		actions  map[string]decision.Action
		reason   map[string]string
	}{
		{
			name:     "scale-up goes to the cheapest variant",
			variants: []v{{Name: "v1-l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}, {Name: "v2-a100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}},
			signal:   up,
			want:     map[string]int32{"v1-l4": 3, "v2-a100": 2},
			actions:  map[string]decision.Action{"v1-l4": decision.ActionScaleUp, "v2-a100": decision.ActionNone},
			reason:   map[string]string{"v1-l4": "scale-up +1 on cheapest eligible variant (cost 5.00"},
		},
		{
			name:     "scale-up tie goes to the alphabetically first",
			variants: []v{{Name: "b", Cost: 5, MaxReplicas: 10, CurrentReplicas: 1}, {Name: "a", Cost: 5, MaxReplicas: 10, CurrentReplicas: 1}},
			signal:   up,
			want:     map[string]int32{"a": 2, "b": 1},
		},
		{
			name:     "scale-down tie goes to the alphabetically last",
			variants: []v{{Name: "b", Cost: 5, MaxReplicas: 10, CurrentReplicas: 2}, {Name: "a", Cost: 5, MaxReplicas: 10, CurrentReplicas: 2}},
			signal:   down,
			want:     map[string]int32{"a": 2, "b": 1},
		},
		{
			name:     "scale-down goes to the most expensive variant",
			variants: []v{{Name: "variant-1", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}, {Name: "variant-2", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3}},
			signal:   down,
			want:     map[string]int32{"variant-1": 1, "variant-2": 3},
			actions:  map[string]decision.Action{"variant-1": decision.ActionScaleDown},
		},
		{
			name:     "cascade prevention: cheapest with pending replicas is skipped",
			variants: []v{{Name: "v1", Cost: 5, MaxReplicas: 10, CurrentReplicas: 3, PendingReplicas: 1}, {Name: "v2", Cost: 15, MaxReplicas: 10, CurrentReplicas: 2}},
			signal:   up,
			want:     map[string]int32{"v1": 3, "v2": 3},
		},
		{
			name:     "variant at max is not eligible for scale-up",
			variants: []v{{Name: "v1", Cost: 5, MaxReplicas: 2, CurrentReplicas: 2}, {Name: "v2", Cost: 15, MaxReplicas: 10, CurrentReplicas: 2}},
			signal:   up,
			want:     map[string]int32{"v1": 2, "v2": 3},
		},
		{
			name:     "no eligible variant: nothing moves and reasons say why",
			variants: []v{{Name: "v1", Cost: 5, MaxReplicas: 2, CurrentReplicas: 2}, {Name: "v2", Cost: 15, MaxReplicas: 3, CurrentReplicas: 3, PendingReplicas: 1}},
			signal:   up,
			want:     map[string]int32{"v1": 2, "v2": 3},
			reason:   map[string]string{"v1": "not eligible for scale-up (pending 0, current 2, max 2)", "v2": "pending 1"},
		},
		{
			// Seed: "scale-down below minimum (prevents scaling to 0)".
			name:     "scale-down never takes a variant below one replica",
			variants: []v{{Name: "expensive", Cost: 20, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 1}, {Name: "cheap", Cost: 5, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 2}},
			signal:   down,
			want:     map[string]int32{"expensive": 1, "cheap": 1},
		},
		{
			name:     "scale-down respects minReplicas above one",
			variants: []v{{Name: "expensive", Cost: 20, MinReplicas: 3, MaxReplicas: 10, CurrentReplicas: 3}, {Name: "cheap", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1}},
			signal:   down,
			want:     map[string]int32{"expensive": 3, "cheap": 1},
		},
		{
			name:     "targets are clamped to bounds",
			variants: []v{{Name: "v", Cost: 5, MinReplicas: 3, MaxReplicas: 4, CurrentReplicas: 1}},
			signal:   decision.Signal{Reason: "steady"},
			want:     map[string]int32{"v": 3},
			reason:   map[string]string{"v": "clamped 1 to [3, 4]"},
		},
		{
			name:     "hold keeps desired for mismatches and current for the rest",
			variants: []v{{Name: "v1", Cost: 5, MaxReplicas: 10, CurrentReplicas: 2, DesiredReplicas: 3}, {Name: "v2", Cost: 20, MaxReplicas: 10, CurrentReplicas: 4}},
			signal:   decision.Signal{Hold: true, HeldTargets: map[string]int32{"v1": 3, "v2": 4}, Reason: "model in transition"},
			want:     map[string]int32{"v1": 3, "v2": 4},
			actions:  map[string]decision.Action{"v1": decision.ActionBlocked, "v2": decision.ActionBlocked},
			reason:   map[string]string{"v1": "blocked: preserved desired 3", "v2": "blocked: preserved current 4"},
		},
		{
			// Token-style signal: 2500 tokens needed; L4 holds 1000 per
			// replica at cost 5 (0.005/token), H100 4000 at 15 (0.00375/token).
			name:     "multi-replica scale-up picks lowest cost per capacity",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 10, CurrentReplicas: 1}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 1}},
			signal:   decision.Signal{RequiredCapacity: 2500, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 4000}},
			want:     map[string]int32{"l4": 1, "h100": 2},
		},
		{
			name:     "multi-replica scale-up spills over when the cheapest hits max",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 3, CurrentReplicas: 1}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 1}},
			signal:   decision.Signal{RequiredCapacity: 5000, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 1000}},
			want:     map[string]int32{"l4": 3, "h100": 4},
		},
		{
			// Per KV token the h100 is cheaper (15/4000 < 5/1000), per unit
			// of useful capacity it is dearer (15/2000 > 5/1000): the l4
			// takes the scale-up, sized by its capacity: ceil(2500/1000) = 3.
			name:     "useful capacity ranks scale-up, capacity sizes it",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 10, CurrentReplicas: 1}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 1}},
			signal: decision.Signal{RequiredCapacity: 2500, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 4000},
				UsefulCapacityPerReplica: map[string]float64{"l4": 1000, "h100": 2000}},
			want: map[string]int32{"l4": 4, "h100": 1},
		},
		{
			// Same figures: the h100 is the dearest per useful capacity and
			// goes first when the spare capacity covers it (5000 >= 4000);
			// the 1000 left removes one l4.
			name:     "useful capacity ranks scale-down",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 10, CurrentReplicas: 3}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 2}},
			signal: decision.Signal{SpareCapacity: 5000, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 4000},
				UsefulCapacityPerReplica: map[string]float64{"l4": 1000, "h100": 2000}},
			want: map[string]int32{"l4": 2, "h100": 1},
		},
		{
			// Units are never mixed: without a useful capacity for the l4,
			// both are ranked by capacity and the h100 is cheaper.
			name:     "useful capacity missing for one variant: ranked by capacity",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 10, CurrentReplicas: 1}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 1}},
			signal: decision.Signal{RequiredCapacity: 2500, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 4000},
				UsefulCapacityPerReplica: map[string]float64{"h100": 2000}},
			want: map[string]int32{"l4": 1, "h100": 2},
		},
		{
			name:     "multi-replica scale-down removes whole replicas only",
			variants: []v{{Name: "l4", Cost: 5, MaxReplicas: 10, CurrentReplicas: 4}, {Name: "h100", Cost: 15, MaxReplicas: 10, CurrentReplicas: 3}},
			signal:   decision.Signal{SpareCapacity: 2500, CapacityPerReplica: map[string]float64{"l4": 1000, "h100": 1000}},
			want:     map[string]int32{"l4": 4, "h100": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := OptimizeGroup(decision.Group{Variants: tc.variants}, tc.signal)
			assert.Equal(t, tc.want, targetsOf(got))
			for _, tg := range got {
				if a, ok := tc.actions[tg.Variant]; ok {
					assert.Equal(t, a, tg.Action, tg.Variant)
				}
				if r, ok := tc.reason[tg.Variant]; ok {
					assert.Contains(t, tg.Reason, r)
				}
				assert.NotEmpty(t, tg.Reason)
				assert.NotEmpty(t, tg.Rule, tg.Variant)
			}
			for i := 1; i < len(got); i++ {
				assert.Less(t, got[i-1].Variant, got[i].Variant, "sorted by name")
			}
		})
	}
}

func TestCostAwareOptimizeKeepsOrder(t *testing.T) {
	reqs := []Request{
		{Group: decision.Group{ModelID: "a", Variants: []v{{Name: "x", Cost: 1, MaxReplicas: 5, CurrentReplicas: 1}}}, Signal: decision.Signal{RequiredCapacity: 1}},
		{Group: decision.Group{ModelID: "b", Variants: []v{{Name: "y", Cost: 1, MaxReplicas: 5, CurrentReplicas: 3}}}, Signal: decision.Signal{SpareCapacity: 1}},
	}
	out := CostAware{}.Optimize(reqs)
	assert.Equal(t, map[string]int32{"x": 2}, targetsOf(out[0]))
	assert.Equal(t, map[string]int32{"y": 2}, targetsOf(out[1]))
}

// A planned mix is applied as is within min/max; variants the plan does not
// name keep their replicas.
func TestPlannedReplicas(t *testing.T) {
	g := decision.Group{Variants: []decision.Variant{
		{Name: "a", Cost: 5, MinReplicas: 1, MaxReplicas: 4, CurrentReplicas: 2},
		{Name: "b", Cost: 15, MinReplicas: 0, MaxReplicas: 3, CurrentReplicas: 1},
		{Name: "c", Cost: 9, MinReplicas: 0, MaxReplicas: 3, CurrentReplicas: 2},
	}}
	cases := []struct {
		name string
		plan map[string]int32
		want map[string]int32
		rule map[string]decision.Rule
	}{
		{"applied", map[string]int32{"a": 3, "b": 0, "c": 2}, map[string]int32{"a": 3, "b": 0, "c": 2},
			map[string]decision.Rule{"a": decision.RuleScaleUp, "b": decision.RuleScaleDown, "c": decision.RuleSteady}},
		{"clamped", map[string]int32{"a": 9, "b": 0}, map[string]int32{"a": 4, "b": 0, "c": 2},
			map[string]decision.Rule{"a": decision.RuleClamped, "b": decision.RuleScaleDown, "c": decision.RuleSteady}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targets := OptimizeGroup(g, decision.Signal{PlannedReplicas: tc.plan, Reason: "r"})
			require.Len(t, targets, 3)
			for _, tg := range targets {
				assert.Equal(t, tc.want[tg.Variant], tg.Replicas, tg.Variant)
				assert.Equal(t, tc.rule[tg.Variant], tg.Rule, tg.Variant)
			}
		})
	}
}
