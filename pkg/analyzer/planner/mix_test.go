package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// mixCase is a mix search's input and the counts it should find.
type mixCase struct {
	name string
	vs   []mixVariant
	need float64
	want []int32
	ok   bool
}

func TestCheapestMix(t *testing.T) {
	l4 := mixVariant{Name: "l4", Cost: 5, Rate: 1, Min: 0, Max: 10, Lo: 0, Hi: 10}
	h100 := mixVariant{Name: "h100", Cost: 15, Rate: 4, Min: 0, Max: 5, Lo: 0, Hi: 5}
	cases := []mixCase{
		{"cheap variant alone", []mixVariant{l4, h100}, 1.5, []int32{2, 0}, true},
		{"equal cost: more rate", []mixVariant{l4, h100}, 2.5, []int32{0, 1}, true},
		{"dear variant is cheaper per unit at scale", []mixVariant{l4, h100}, 8, []int32{0, 2}, true},
		{"exact mix beats either alone", []mixVariant{l4, h100}, 9, []int32{1, 2}, true},
		{"at least one replica", []mixVariant{l4, h100}, 0, []int32{1, 0}, true},
		{"scale-up only adds", []mixVariant{l4, func() mixVariant { v := h100; v.Lo = 1; return v }()}, 4.5, []int32{1, 1}, true},
		{"beyond every max", []mixVariant{l4, h100}, 100, []int32{10, 5}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cheapestMix(tc.vs, tc.need)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			g, gok := greedyMix(tc.vs, tc.need)
			if ok && gok && tc.need > 0 {
				assert.LessOrEqual(t, mixCost(tc.vs, got), mixCost(tc.vs, g)+1e-9, "exact never dearer than greedy")
			}
		})
	}
}

func TestOrderMix(t *testing.T) {
	l4 := mixVariant{Name: "l4", Cost: 5, Rate: 1, Min: 0, Max: 10, Hi: 10}
	h100 := mixVariant{Name: "h100", Cost: 15, Rate: 4, Min: 0, Max: 5, Hi: 5}
	running := func(l4n, h100n int32) []mixVariant {
		a, b := l4, h100
		a.Lo, b.Lo = l4n, h100n
		return []mixVariant{a, b}
	}
	cases := []mixCase{
		// 6 L4 (30) serve 6; a seventh costs 5 where an H100 costs 15,
		// but 2 H100 (30) cover 7 on their own: the H100s are ordered and
		// the L4s are left for the scale-down to give back.
		{"adds toward the cheapest whole mix", running(6, 0), 7, []int32{6, 2}, true},
		{"keeps what runs when the whole mix is already there", running(1, 2), 9, []int32{1, 2}, true},
		{"adds only what the whole mix lacks", running(1, 1), 9, []int32{1, 2}, true},
		{"a replica already running counts", running(0, 2), 9, []int32{1, 2}, true},
		{"beyond every max", running(6, 0), 100, []int32{10, 5}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := orderMix(tc.vs, tc.need)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			for i, v := range tc.vs {
				assert.GreaterOrEqual(t, got[i], v.Lo, "an order never removes %s", v.Name)
			}
			if ok {
				supply := 0.0
				for i, v := range tc.vs {
					supply += float64(got[i]) * v.Rate
				}
				assert.GreaterOrEqual(t, supply+1e-9, tc.need, "the order covers the need")
			}
		})
	}
	// The cheapest addition alone would add one L4 to the six.
	inc, _ := cheapestMix(running(6, 0), 7)
	assert.Equal(t, []int32{7, 0}, inc)
}
