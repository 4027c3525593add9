package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestQuotasFrom(t *testing.T) {
	rq := func(ns, name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Used: used}}
	}
	q := resource.MustParse
	got := QuotasFrom([]*corev1.ResourceQuota{
		rq("team-b", "gpus", corev1.ResourceList{"requests.nvidia.com/gpu": q("4")}, corev1.ResourceList{"requests.nvidia.com/gpu": q("3")}),
		rq("team-a", "cpu-only", corev1.ResourceList{"requests.cpu": q("10")}, nil),
		rq("team-a", "gpus", corev1.ResourceList{"requests.nvidia.com/gpu": q("8")}, nil), // status not yet written
		rq("team-a", "amd", corev1.ResourceList{"requests.amd.com/gpu": q("1")}, nil),
	}, "nvidia.com/gpu")
	assert.Equal(t, []Quota{{Namespace: "team-a", Name: "gpus", Hard: 8}, {Namespace: "team-b", Name: "gpus", Hard: 4, Used: 3}}, got)
	assert.Equal(t, corev1.ResourceName("requests.amd.com/gpu"), QuotaResource("amd.com/gpu"))
}

func TestEffectiveQuotas(t *testing.T) {
	vs := []Variant{
		{Key: "a/x", Namespace: "a", Replicas: 2, PerReplica: Amount{GPUs: 2}}, // 4
		{Key: "a/y", Namespace: "a", Replicas: 1},                              // 1 (no gpusPerReplica)
		{Key: "b/z", Namespace: "b", Replicas: 1, PerReplica: Amount{GPUs: 1}},
	}
	got := EffectiveQuotas([]Quota{
		{Namespace: "a", Name: "lagging", Hard: 8, Used: 2}, // pods of a just-scaled target not created yet
		{Namespace: "b", Name: "ahead", Hard: 8, Used: 3},   // other GPU pods count too
		{Namespace: "c", Name: "empty", Hard: 8},
	}, vs)
	assert.Equal(t, []int64{5, 3, 0}, []int64{got[0].Used, got[1].Used, got[2].Used})
}

// TestLedgerQuota: a variant may take the tighter of its pool's room and its
// namespace quotas' room; what one admission takes, the next cannot.
func TestLedgerQuota(t *testing.T) {
	pool := func(total int64) map[string]Usage {
		return map[string]Usage{"p": {Pool: "p", Total: Amount{GPUs: total, GPUMemory: Unlimited},
			Holders: nil}}
	}
	v := func(ns, name string, gpus int64, pool string) Variant {
		return Variant{Key: ns + "/" + name, Namespace: ns, Pool: pool, PerReplica: Amount{GPUs: gpus}}
	}
	type step struct {
		v                Variant
		current, desired int32
		want             int32
		wantReason       string // substring; "" = admitted in full
		wantQuota        string // the quota named, "" = none
	}
	tests := []struct {
		name   string
		usage  map[string]Usage
		quotas []Quota
		steps  []step
	}{
		{name: "no quota: the pool decides", usage: pool(8), steps: []step{{v: v("a", "x", 2, "p"), current: 0, desired: 4, want: 4}}},
		{name: "quota tighter than the pool: cut by the quota, named",
			usage: pool(16), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 6, Used: 1}},
			steps: []step{{v: v("a", "x", 2, "p"), current: 0, desired: 4, want: 2,
				wantReason: "GPU quota: a/x +4 (2 GPUs each) cut to +2: ResourceQuota a/gpus (hard 6 GPUs, used 1) has 5 GPUs left", wantQuota: "a/gpus"}}},
		{name: "pool tighter than the quota: cut by the pool",
			usage: pool(4), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 100}},
			steps: []step{{v: v("a", "x", 2, "p"), current: 0, desired: 4, want: 2, wantReason: "GPU budget: a/x +4 (2 GPUs each) cut to +2: pool p"}}},
		{name: "the tightest of several quotas",
			usage: pool(16), quotas: []Quota{{Namespace: "a", Name: "loose", Hard: 10}, {Namespace: "a", Name: "tight", Hard: 3, Used: 1}},
			steps: []step{{v: v("a", "x", 1, "p"), current: 1, desired: 9, want: 3, wantReason: "ResourceQuota a/tight (hard 3 GPUs, used 1)", wantQuota: "a/tight"}}},
		{name: "the quota applies to a variant in no pool", usage: pool(16), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 2}},
			steps: []step{{v: v("a", "x", 1, ""), current: 0, desired: 5, want: 2, wantQuota: "a/gpus", wantReason: "GPU quota"}}},
		{name: "the quota applies when no pool is defined", usage: nil, quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 2}},
			steps: []step{{v: v("a", "x", 1, ""), current: 0, desired: 5, want: 2, wantQuota: "a/gpus", wantReason: "GPU quota"}}},
		{name: "one namespace's quota leaves another's scale-ups to the pool",
			usage: pool(8), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 0}},
			steps: []step{{v: v("a", "x", 1, "p"), current: 0, desired: 1, want: 0, wantQuota: "a/gpus", wantReason: "cut to +0"},
				{v: v("b", "y", 1, "p"), current: 0, desired: 8, want: 8}}},
		{name: "what one variant takes the next of its namespace cannot",
			usage: pool(16), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 4}},
			steps: []step{{v: v("a", "x", 1, "p"), current: 0, desired: 3, want: 3},
				{v: v("a", "y", 1, "p"), current: 0, desired: 3, want: 1, wantQuota: "a/gpus", wantReason: "(hard 4 GPUs, used 3) has 1 GPUs left"}}},
		{name: "a scale-down gives nothing back within the cycle, and passes",
			usage: pool(16), quotas: []Quota{{Namespace: "a", Name: "gpus", Hard: 4, Used: 4}},
			steps: []step{{v: v("a", "x", 1, "p"), current: 3, desired: 1, want: 1},
				{v: v("a", "y", 1, "p"), current: 0, desired: 1, want: 0, wantQuota: "a/gpus", wantReason: "cut to +0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(tt.usage, UnbudgetedUnlimited, nil).WithQuotas(tt.quotas)
			for i, s := range tt.steps {
				a := l.Admit(s.v, s.current, s.desired)
				assert.Equal(t, s.want, a.Replicas, "step %d", i)
				if s.wantReason == "" {
					assert.False(t, a.Cut(), "step %d: %s", i, a.Reason)
				} else {
					assert.Contains(t, a.Reason, s.wantReason, "step %d", i)
				}
				if s.wantQuota == "" {
					assert.Nil(t, a.Quota, "step %d", i)
					continue
				}
				require.NotNil(t, a.Quota, "step %d", i)
				assert.Equal(t, s.wantQuota, a.Quota.Namespace+"/"+a.Quota.Name, "step %d", i)
			}
		})
	}
	// The caller's quotas are not changed by admissions.
	qs := []Quota{{Namespace: "a", Name: "gpus", Hard: 4}}
	NewLedger(nil, UnbudgetedUnlimited, nil).WithQuotas(qs).Admit(v("a", "x", 1, ""), 0, 2)
	assert.Equal(t, int64(0), qs[0].Used)
}

func TestLedgerAnnotate(t *testing.T) {
	l := NewLedger(nil, UnbudgetedUnlimited, map[string]string{"team-b/big": "org/big"})
	assert.Equal(t, []Holder{
		{Name: "team-b/big", Namespace: "team-b", Model: "org/big", Amount: Amount{GPUs: 4}},
		{Name: "pod batch/train-0", Namespace: "batch", Amount: Amount{GPUs: 1}},
	}, l.Annotate([]Holder{{Name: "team-b/big", Amount: Amount{GPUs: 4}}, {Name: "pod batch/train-0", Amount: Amount{GPUs: 1}}}))
}
