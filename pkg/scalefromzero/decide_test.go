package scalefromzero

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/budget"
)

func TestAtZero(t *testing.T) {
	assert.False(t, Group{}.AtZero(), "a group without resolved variants is never woken")
	assert.True(t, Group{Variants: []Variant{{Replicas: 0}, {Replicas: 0}}}.AtZero())
	assert.False(t, Group{Variants: []Variant{{Replicas: 0}, {Replicas: 1}}}.AtZero(), "one serving variant takes the queue")
}

func TestChoose(t *testing.T) {
	unlimited := budget.Amount{GPUs: budget.Unlimited, GPUMemory: budget.Unlimited}
	pool := func(total, allocated int64, holders ...budget.Holder) budget.Usage {
		return budget.Usage{Total: budget.Amount{GPUs: total, GPUMemory: budget.Unlimited}, Allocated: budget.Amount{GPUs: allocated}, Holders: holders}
	}
	big := budget.Holder{Name: "prod/big", Amount: budget.Amount{GPUs: 6}}
	tests := []struct {
		name         string
		variants     []Variant
		usage        map[string]budget.Usage
		want         Result
		wantVariant  string
		wantSkipped  int
		wantBlockers []budget.Holder
	}{
		{name: "no variants", want: ResultNoVariant},
		{name: "cheapest wins", want: ResultScaled, wantVariant: "l4",
			variants: []Variant{{Name: "h100", Cost: 15}, {Name: "l4", Cost: 5}}},
		{name: "cost tie: alphabetical", want: ResultScaled, wantVariant: "a",
			variants: []Variant{{Name: "b", Cost: 5}, {Name: "a", Cost: 5}}},
		{name: "no budget configured: needs ignored", want: ResultScaled, wantVariant: "l4",
			variants: []Variant{{Name: "l4", Cost: 5, Pool: "p", Need: budget.Amount{GPUs: 100}}}},
		{name: "cheapest does not fit: next cheapest that fits", want: ResultScaled, wantVariant: "two", wantSkipped: 1,
			variants: []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "two", Cost: 2, Pool: "p", Need: budget.Amount{GPUs: 2}}},
			usage:    map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "nothing fits: blocked, holders named", want: ResultBlocked, wantSkipped: 2, wantBlockers: []budget.Holder{big},
			variants: []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "three", Cost: 2, Pool: "p", Need: budget.Amount{GPUs: 3}}},
			usage:    map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "variant outside every pool is not limited", want: ResultScaled, wantVariant: "free", wantSkipped: 1,
			variants: []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "free", Cost: 9, Need: budget.Amount{GPUs: 4}}},
			usage:    map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "annotation naming an undefined pool blocks", want: ResultBlocked, wantSkipped: 1,
			variants: []Variant{{Name: "typo", Cost: 1, Pool: "nope", Need: budget.Amount{GPUs: 1}}},
			usage:    map[string]budget.Usage{"p": {Total: unlimited}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Choose(Group{Variants: tt.variants}, tt.usage)
			assert.Equal(t, tt.want, d.Result)
			assert.Equal(t, tt.wantVariant, d.Variant.Name)
			assert.Len(t, d.Skipped, tt.wantSkipped)
			assert.Equal(t, tt.wantBlockers, d.Blockers)
		})
	}
}

func TestSkipString(t *testing.T) {
	s := Skip{Variant: "four", Pool: "p", Need: budget.Amount{GPUs: 4}, Available: budget.Amount{GPUs: 2, GPUMemory: budget.Unlimited}}
	assert.Equal(t, "four needs 4 GPUs, pool p has 2 GPUs, unlimited GPU memory left", s.String())
	assert.Equal(t, `x is assigned to pool "q", which the budget does not define`, Skip{Variant: "x", Pool: "q", UnknownPool: true}.String())
	assert.Equal(t, "prod/big (6 GPUs), pod prod/batch (1 GPUs)", HolderNames([]budget.Holder{
		{Name: "prod/big", Amount: budget.Amount{GPUs: 6}}, {Name: "pod prod/batch", Amount: budget.Amount{GPUs: 1}}}))
}
