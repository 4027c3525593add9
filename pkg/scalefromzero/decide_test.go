package scalefromzero

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	bigNamed := budget.Holder{Name: "prod/big", Namespace: "prod", Model: "m-big", Amount: budget.Amount{GPUs: 6}}
	tight := budget.Quota{Namespace: "prod", Name: "gpus", Hard: 4, Used: 2}
	tests := []struct {
		name         string
		variants     []Variant
		usage        map[string]budget.Usage
		quotas       []budget.Quota
		policy       budget.Unbudgeted
		noBudget     bool
		want         Result
		wantVariant  string
		wantSkipped  []string
		wantBlockers []budget.Holder
		wantQuotas   []budget.Quota
	}{
		{name: "no variants", want: ResultNoVariant},
		{name: "cheapest wins", want: ResultScaled, wantVariant: "l4",
			variants: []Variant{{Name: "h100", Cost: 15}, {Name: "l4", Cost: 5}}},
		{name: "cost tie: alphabetical", want: ResultScaled, wantVariant: "a",
			variants: []Variant{{Name: "b", Cost: 5}, {Name: "a", Cost: 5}}},
		{name: "no budget configured: needs ignored", want: ResultScaled, wantVariant: "l4", noBudget: true, policy: budget.UnbudgetedRefuse,
			variants: []Variant{{Name: "l4", Cost: 5, Pool: "p", Need: budget.Amount{GPUs: 100}}}},
		{name: "cheapest does not fit: next cheapest that fits", want: ResultScaled, wantVariant: "two",
			wantSkipped: []string{"GPU budget: prod/four +1 (4 GPUs each) cut to +0: pool p has 2 GPUs, unlimited GPU memory left of 8 GPUs, unlimited GPU memory, held by prod/big (model m-big, 6 GPUs)"},
			variants:    []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "two", Cost: 2, Pool: "p", Need: budget.Amount{GPUs: 2}}},
			usage:       map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "nothing fits: blocked, holders named with their models", want: ResultBlocked, wantSkipped: []string{"prod/four +1", "prod/three +1"},
			wantBlockers: []budget.Holder{bigNamed},
			variants:     []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "three", Cost: 2, Pool: "p", Need: budget.Amount{GPUs: 3}}},
			usage:        map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "variant outside every pool is not limited", want: ResultScaled, wantVariant: "free", wantSkipped: []string{"prod/four +1"},
			variants: []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "free", Cost: 9, Need: budget.Amount{GPUs: 4}}},
			usage:    map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "--unbudgeted-variants=refuse: a variant outside every pool is refused", want: ResultBlocked, policy: budget.UnbudgetedRefuse,
			wantSkipped: []string{"prod/free +1 refused (--unbudgeted-variants=refuse): no GPU budget pool applies"},
			variants:    []Variant{{Name: "free", Cost: 9, Need: budget.Amount{GPUs: 4}}},
			usage:       map[string]budget.Usage{"p": pool(8, 6, big)}},
		{name: "annotation naming an undefined pool blocks", want: ResultBlocked, wantSkipped: []string{`assigned to pool "nope", which the budget does not define`},
			variants: []Variant{{Name: "typo", Cost: 1, Pool: "nope", Need: budget.Amount{GPUs: 1}}},
			usage:    map[string]budget.Usage{"p": {Total: unlimited}}},
		{name: "the namespace quota refuses what the pool allows: the next variant fits it", want: ResultScaled, wantVariant: "two",
			wantSkipped: []string{"GPU quota: prod/four +1 (4 GPUs each) cut to +0: ResourceQuota prod/gpus (hard 4 GPUs, used 2) has 2 GPUs left"},
			variants:    []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}, {Name: "two", Cost: 2, Pool: "p", Need: budget.Amount{GPUs: 2}}},
			usage:       map[string]budget.Usage{"p": pool(16, 0)}, quotas: []budget.Quota{tight}},
		{name: "the quota limits a variant in no pool", want: ResultBlocked, wantQuotas: []budget.Quota{tight},
			wantSkipped: []string{"GPU quota: prod/free +1 (4 GPUs each) cut to +0: ResourceQuota prod/gpus"},
			variants:    []Variant{{Name: "free", Cost: 1, Need: budget.Amount{GPUs: 4}}},
			usage:       map[string]budget.Usage{"p": pool(16, 0)}, quotas: []budget.Quota{tight}},
		{name: "another namespace's quota does not apply", want: ResultScaled, wantVariant: "four",
			variants: []Variant{{Name: "four", Cost: 1, Pool: "p", Need: budget.Amount{GPUs: 4}}},
			usage:    map[string]budget.Usage{"p": pool(16, 0)}, quotas: []budget.Quota{{Namespace: "dev", Name: "gpus", Hard: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l *budget.Ledger
			if !tt.noBudget {
				policy := tt.policy
				if policy == "" {
					policy = budget.UnbudgetedUnlimited
				}
				l = budget.NewLedger(tt.usage, policy, map[string]string{"prod/big": "m-big"}).WithQuotas(tt.quotas)
			}
			d := Choose(Group{Key: GroupKey{Namespace: "prod", ModelID: "m"}, Variants: tt.variants}, l)
			assert.Equal(t, tt.want, d.Result)
			assert.Equal(t, tt.wantVariant, d.Variant.Name)
			require.Len(t, d.Skipped, len(tt.wantSkipped))
			for i, w := range tt.wantSkipped {
				assert.Contains(t, d.Skipped[i].String(), w)
			}
			assert.Equal(t, tt.wantBlockers, d.Blockers)
			assert.Equal(t, tt.wantQuotas, d.Quotas)
		})
	}
}

func TestHolderNames(t *testing.T) {
	assert.Equal(t, "prod/big (6 GPUs), pod prod/batch (1 GPUs)", HolderNames([]budget.Holder{
		{Name: "prod/big", Amount: budget.Amount{GPUs: 6}}, {Name: "pod prod/batch", Amount: budget.Amount{GPUs: 1}}}))
}
