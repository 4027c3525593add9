package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func TestParseUnbudgeted(t *testing.T) {
	for _, ok := range []string{"unlimited", "refuse"} {
		got, err := ParseUnbudgeted(ok)
		require.NoError(t, err)
		assert.Equal(t, Unbudgeted(ok), got)
	}
	_, err := ParseUnbudgeted("deny")
	assert.EqualError(t, err, `--unbudgeted-variants="deny": want unlimited or refuse`)
}

func TestLedgerAdmit(t *testing.T) {
	// Pool "a": 8 GPUs, 160Gi; team-b/big holds 2 x (2 GPUs, 60Gi), the
	// admitted variant team-a/small 1 x (1 GPU, 20Gi). Left: 3 GPUs, 20Gi.
	// Pool "gpus-only": 4 GPUs, no memory limit, a foreign pod holds 3.
	usage := func() map[string]Usage {
		return map[string]Usage{
			"a": {Pool: "a", Total: Amount{GPUs: 8, GPUMemory: 160 * gi}, Allocated: Amount{GPUs: 5, GPUMemory: 140 * gi},
				Holders: []Holder{{Name: "team-b/big", Amount: Amount{GPUs: 4, GPUMemory: 120 * gi}},
					{Name: "team-a/small", Amount: Amount{GPUs: 1, GPUMemory: 20 * gi}}}},
			"gpus-only": {Pool: "gpus-only", Total: Amount{GPUs: 4, GPUMemory: Unlimited}, Allocated: Amount{GPUs: 3},
				Holders: []Holder{{Name: "pod batch/train-0", Amount: Amount{GPUs: 3}}}},
		}
	}
	models := map[string]string{"team-a/small": "org/small", "team-b/big": "org/big"}
	small := Variant{Key: "team-a/small", Namespace: "team-a", Pool: "a", Replicas: 1, PerReplica: Amount{GPUs: 1, GPUMemory: 20 * gi}}
	with := func(v Variant, f func(*Variant)) Variant { f(&v); return v }
	tests := []struct {
		name             string
		usage            map[string]Usage
		policy           Unbudgeted
		v                Variant
		current, desired int32
		want             int32
		wantReason       []string // substrings; none = admitted in full
		wantBlockers     []string
	}{
		{name: "scale-down passes", usage: usage(), v: small, current: 3, desired: 1, want: 1},
		{name: "hold passes", usage: usage(), v: small, current: 1, desired: 1, want: 1},
		{name: "fits in full", usage: usage(), v: small, current: 1, desired: 2, want: 2},
		{name: "memory cuts +3 to +1, naming the other namespace's model", usage: usage(), v: small, current: 1, desired: 4, want: 2,
			wantReason: []string{"GPU budget: team-a/small +3 (1 GPUs, 20Gi GPU memory each) cut to +1", "pool a has 3 GPUs, 20Gi GPU memory left of 8 GPUs, 160Gi GPU memory",
				"held by team-b/big (model org/big, 4 GPUs, 120Gi GPU memory)"},
			wantBlockers: []string{"team-b/big"}},
		{name: "GPUs cut: 3 GPUs per replica, 3 left", usage: usage(), v: with(small, func(v *Variant) { v.PerReplica = Amount{GPUs: 3, GPUMemory: gi} }),
			current: 1, desired: 3, want: 2, wantReason: []string{"+2 (3 GPUs, 1Gi GPU memory each) cut to +1"}, wantBlockers: []string{"team-b/big"}},
		{name: "unknown gpusPerReplica counts 1 GPU", usage: usage(), v: with(small, func(v *Variant) { v.Pool, v.PerReplica = "gpus-only", Amount{} }),
			current: 0, desired: 3, want: 1, wantReason: []string{"+3 (1 GPUs each) cut to +1", "held by pod batch/train-0 (3 GPUs)"},
			wantBlockers: []string{"pod batch/train-0"}},
		{name: "no pool defined at all: unlimited", usage: nil, v: small, current: 1, desired: 9, want: 9},
		{name: "no pool defined, refuse", usage: nil, policy: UnbudgetedRefuse, v: small, current: 1, desired: 9, want: 1,
			wantReason: []string{"+8 refused (--unbudgeted-variants=refuse): no GPU budget pool applies"}},
		{name: "no pool assigned: unlimited", usage: usage(), v: with(small, func(v *Variant) { v.Pool = "" }), current: 1, desired: 9, want: 9},
		{name: "no pool assigned, refuse", usage: usage(), policy: UnbudgetedRefuse, v: with(small, func(v *Variant) { v.Pool = "" }),
			current: 1, desired: 9, want: 1, wantReason: []string{"refused (--unbudgeted-variants=refuse)"}},
		{name: "unknown pool: refused whatever the policy", usage: usage(), v: with(small, func(v *Variant) { v.Pool = "typo" }),
			current: 1, desired: 2, want: 1, wantReason: []string{`assigned to pool "typo", which the budget does not define`}},
		{name: "no gpuMemoryPerReplica, unlimited: GPUs still checked", usage: usage(),
			v: with(small, func(v *Variant) { v.PerReplica.GPUMemory = 0 }), current: 1, desired: 9, want: 4,
			wantReason: []string{"+8 (1 GPUs each) cut to +3"}, wantBlockers: []string{"team-b/big"}},
		{name: "no gpuMemoryPerReplica, refuse", usage: usage(), policy: UnbudgetedRefuse,
			v: with(small, func(v *Variant) { v.PerReplica.GPUMemory = 0 }), current: 1, desired: 2, want: 1,
			wantReason: []string{"refused (--unbudgeted-variants=refuse): pool a limits GPU memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := tt.policy
			if policy == "" {
				policy = UnbudgetedUnlimited
			}
			a := NewLedger(tt.usage, policy, models).Admit(tt.v, tt.current, tt.desired)
			assert.Equal(t, tt.want, a.Replicas, a.Reason)
			assert.Equal(t, len(tt.wantReason) > 0, a.Cut(), a.Reason)
			for _, r := range tt.wantReason {
				assert.Contains(t, a.Reason, r)
			}
			var blockers []string
			for _, h := range a.Blockers {
				blockers = append(blockers, h.Name)
			}
			assert.Equal(t, tt.wantBlockers, blockers)
		})
	}
}

// Admitted replicas are taken out of the pool: a second variant does not
// get the same GPUs, and the first is named among its holders.
func TestLedgerAdmitsInTurn(t *testing.T) {
	usage := map[string]Usage{"p": {Pool: "p", Total: Amount{GPUs: 4, GPUMemory: Unlimited}}}
	l := NewLedger(usage, UnbudgetedUnlimited, map[string]string{"x/first": "m1"})
	first := Variant{Key: "x/first", Pool: "p", PerReplica: Amount{GPUs: 1}}
	second := Variant{Key: "y/second", Pool: "p", PerReplica: Amount{GPUs: 1}}
	assert.Equal(t, int32(3), l.Admit(first, 0, 3).Replicas)
	a := l.Admit(second, 0, 3)
	assert.Equal(t, int32(1), a.Replicas)
	assert.Contains(t, a.Reason, "held by x/first (model m1, 3 GPUs)")
	assert.Equal(t, Amount{}, usage["p"].Allocated, "the caller's usage is not modified")
}

func TestCover(t *testing.T) {
	usage := map[string]Usage{
		"mem": {Total: Amount{GPUs: Unlimited, GPUMemory: 80 * gi}},
		"gpu": {Total: Amount{GPUs: 8, GPUMemory: Unlimited}},
	}
	tests := []struct {
		name  string
		usage map[string]Usage
		v     Variant
		want  string
	}{
		{"budgeted by memory", usage, Variant{Pool: "mem", PerReplica: Amount{GPUMemory: gi}}, llmdv1alpha1.ReasonBudgeted},
		{"GPU-only pool needs no memory", usage, Variant{Pool: "gpu"}, llmdv1alpha1.ReasonBudgeted},
		{"memory pool without gpuMemoryPerReplica", usage, Variant{Pool: "mem", PerReplica: Amount{GPUs: 1}}, llmdv1alpha1.ReasonNoGPUMemoryPerReplica},
		{"no pool assigned", usage, Variant{}, llmdv1alpha1.ReasonNoPool},
		{"no pool defined", nil, Variant{Pool: "mem"}, llmdv1alpha1.ReasonNoPool},
		{"pool not defined", usage, Variant{Pool: "typo"}, llmdv1alpha1.ReasonUnknownPool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Cover(tt.v, tt.usage)
			assert.Equal(t, tt.want, c.Reason, c.Message)
			assert.Equal(t, tt.want == llmdv1alpha1.ReasonBudgeted, c.Budgeted())
		})
	}
}
