package decision

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheaper(t *testing.T) {
	tests := []struct {
		name         string
		costA, costB float64
		nameA, nameB string
		want         bool
	}{
		{"lower cost first", 5, 10, "z", "a", true},
		{"higher cost after", 10, 5, "a", "z", false},
		{"tie: alphabetical", 5, 5, "a", "b", true},
		{"tie: alphabetical, reversed", 5, 5, "b", "a", false},
		{"same variant is not cheaper than itself", 5, 5, "a", "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Cheaper(tt.costA, tt.nameA, tt.costB, tt.nameB))
		})
	}
}

// JoinRoles sums the parts' capacities, merges their maps and holds the
// group only when every part holds.
func TestJoinRoles(t *testing.T) {
	g := Group{Variants: []Variant{{Name: "p", Role: RolePrefill}, {Name: "d", Role: RoleDecode}}}
	parts := g.ByRole()
	base := Signal{Analyzer: "x", Priority: 2}
	for _, tc := range []struct {
		name string
		sigs []Signal
		want Signal
	}{
		{"one part holds: only its variants",
			[]Signal{{RequiredCapacity: 2, Reason: "short", CapacityPerReplica: map[string]float64{"p": 4}},
				{Hold: true, HeldTargets: map[string]int32{"d": 3}, Reason: "held"}},
			Signal{Analyzer: "x", Priority: 2, RequiredCapacity: 2, CapacityPerReplica: map[string]float64{"p": 4},
				Reason: "prefill: short; decode: held", Roles: []RoleSignal{
					{Role: RolePrefill, Variants: []string{"p"}, RequiredCapacity: 2, Reason: "prefill: short"},
					{Role: RoleDecode, Variants: []string{"d"}, Reason: "decode: held", Hold: true, HeldTargets: map[string]int32{"d": 3}}}}},
		{"every part holds: the group holds",
			[]Signal{{Hold: true, HeldTargets: map[string]int32{"p": 2}, Reason: "a"}, {Hold: true, HeldTargets: map[string]int32{"d": 3}, Reason: "b", SpareCapacity: 1}},
			Signal{Analyzer: "x", Priority: 2, Hold: true, HeldTargets: map[string]int32{"p": 2, "d": 3}, SpareCapacity: 1,
				Reason: "prefill: a; decode: b", Roles: []RoleSignal{
					{Role: RolePrefill, Variants: []string{"p"}, Reason: "prefill: a", Hold: true, HeldTargets: map[string]int32{"p": 2}},
					{Role: RoleDecode, Variants: []string{"d"}, Reason: "decode: b", SpareCapacity: 1, Hold: true, HeldTargets: map[string]int32{"d": 3}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, JoinRoles(base, parts, tc.sigs))
		})
	}
}

// PrefillServiceRate: mu = r + 1/TTFT, arrival-weighted over the
// variant's replicas reporting both.
func TestPrefillServiceRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		reps []ReplicaMetrics
		mu   float64
		ok   bool
	}{
		{"one replica", []ReplicaMetrics{{Variant: "p", ArrivalRate: 6, AvgTTFTms: 500}}, 8, true},
		// (2*(2+10) + 6*(6+2)) / 8 = 9.
		{"arrival-weighted", []ReplicaMetrics{{Variant: "p", ArrivalRate: 2, AvgTTFTms: 100}, {Variant: "p", ArrivalRate: 6, AvgTTFTms: 500}}, 9, true},
		{"other variants and incomplete replicas ignored", []ReplicaMetrics{{Variant: "d", ArrivalRate: 6, AvgTTFTms: 100},
			{Variant: "p", ArrivalRate: 6}, {Variant: "p", AvgTTFTms: 100}, {Variant: "p", ArrivalRate: 1, AvgTTFTms: 1000}}, 2, true},
		{"nothing reported", []ReplicaMetrics{{Variant: "p"}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu, ok := PrefillServiceRate("p", tc.reps)
			assert.Equal(t, tc.ok, ok)
			assert.InDelta(t, tc.mu, mu, 1e-9)
		})
	}
}
