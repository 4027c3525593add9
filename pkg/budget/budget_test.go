package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wva-project/wva/pkg/decision"
)

const gi = int64(1) << 30

func TestAssign(t *testing.T) {
	pools := []Pool{
		{Name: "h100", NodeSelector: labels.Set{"pool": "h100"}},
		{Name: "a-any-gpu", NodeSelector: labels.Set{"gpu": "true"}},
		{Name: "empty"},
	}
	tests := []struct {
		name       string
		annotation string
		template   map[string]string
		want       string
	}{
		{"template selector implies pool", "", map[string]string{"pool": "h100", "zone": "a"}, "h100"},
		{"first pool by name wins", "", map[string]string{"pool": "h100", "gpu": "true"}, "a-any-gpu"},
		{"no match", "", map[string]string{"pool": "l4"}, ""},
		{"no template selector: empty selector claims nothing", "", nil, ""},
		{"annotation wins", "h100", map[string]string{"gpu": "true"}, "h100"},
		{"unknown annotation is kept (blocks rather than lifting the limit)", "typo", nil, "typo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Assign(pools, tt.annotation, tt.template)) })
	}
}

func TestCompute(t *testing.T) {
	pools := []Pool{{Name: "gpu-a", NodeSelector: labels.Set{"pool": "gpu-a"}, Total: Amount{GPUs: 8, GPUMemory: 640 * gi}}}
	nodes := []Node{
		{Name: "n1", Labels: map[string]string{"pool": "gpu-a"}, GPUs: 8},
		{Name: "n2", Labels: map[string]string{"pool": "other"}, GPUs: 8},
	}
	big := labels.SelectorFromSet(labels.Set{"app": "big"})
	pods := []Pod{
		{Namespace: "prod", Name: "big-0", NodeName: "n1", Labels: map[string]string{"app": "big"}, GPUs: 6},
		{Namespace: "prod", Name: "batch", NodeName: "n1", Labels: map[string]string{"app": "batch"}, GPUs: 1},
		{Namespace: "prod", Name: "elsewhere", NodeName: "n2", Labels: map[string]string{"app": "big"}, GPUs: 8},
		{Namespace: "prod", Name: "cpu", NodeName: "n1", Labels: map[string]string{"app": "cpu"}},
		// Same labels in another namespace: not the variant's pod.
		{Namespace: "dev", Name: "big-0", NodeName: "n1", Labels: map[string]string{"app": "big"}, GPUs: 0},
	}
	variants := []Variant{
		{Key: "prod/big", Namespace: "prod", Pool: "gpu-a", Replicas: 1, PerReplica: Amount{GPUs: 6, GPUMemory: 480 * gi}, PodSelector: big},
		// Just scaled to 1, no pod yet: its spec still holds budget.
		{Key: "prod/small", Namespace: "prod", Pool: "gpu-a", Replicas: 1, PerReplica: Amount{GPUs: 1}, PodSelector: labels.SelectorFromSet(labels.Set{"app": "small"})},
		{Key: "prod/idle", Namespace: "prod", Pool: "gpu-a", Replicas: 0, PerReplica: Amount{GPUs: 4}},
	}
	u := Compute(pools, nodes, pods, variants)["gpu-a"]
	assert.Equal(t, Amount{GPUs: 8, GPUMemory: 480 * gi}, u.Allocated)
	assert.Equal(t, []Holder{
		{Name: "prod/big", Amount: Amount{GPUs: 6, GPUMemory: 480 * gi}},
		{Name: "pod prod/batch", Amount: Amount{GPUs: 1}},
		{Name: "prod/small", Amount: Amount{GPUs: 1}},
	}, u.Holders)
	assert.Equal(t, Amount{GPUs: 0, GPUMemory: 160 * gi}, u.Available())
}

func TestComputePodsBeyondSpec(t *testing.T) {
	// A rollout can briefly run more pods than spec.replicas: what is bound
	// counts.
	pools := []Pool{{Name: "p", NodeSelector: labels.Set{"pool": "p"}, Total: Amount{GPUs: 8, GPUMemory: Unlimited}}}
	nodes := []Node{{Name: "n", Labels: map[string]string{"pool": "p"}, GPUs: 8}}
	sel := labels.SelectorFromSet(labels.Set{"app": "v"})
	pods := []Pod{
		{Namespace: "ns", Name: "v-old", NodeName: "n", Labels: map[string]string{"app": "v"}, GPUs: 2},
		{Namespace: "ns", Name: "v-new", NodeName: "n", Labels: map[string]string{"app": "v"}, GPUs: 2},
	}
	// Not assigned to the pool (no nodeSelector) but running there.
	variants := []Variant{{Key: "ns/v", Namespace: "ns", Replicas: 1, PerReplica: Amount{GPUs: 2}, PodSelector: sel}}
	u := Compute(pools, nodes, pods, variants)["p"]
	assert.Equal(t, int64(4), u.Allocated.GPUs)
	assert.Equal(t, []Holder{{Name: "ns/v", Amount: Amount{GPUs: 4}}}, u.Holders)
}

func TestParseConfigMap(t *testing.T) {
	pools, err := ParseConfigMap(map[string]string{
		"h100": "nodeSelector: {pool: h100}\ngpus: 8\ngpuMemory: 640Gi\n",
		"l4":   `{"nodeSelector": {"pool": "l4"}, "gpuMemory": "96Gi"}`,
	})
	require.NoError(t, err)
	assert.Equal(t, []Pool{
		{Name: "h100", NodeSelector: labels.Set{"pool": "h100"}, Total: Amount{GPUs: 8, GPUMemory: 640 * gi}},
		{Name: "l4", NodeSelector: labels.Set{"pool": "l4"}, Total: Amount{GPUs: Unlimited, GPUMemory: 96 * gi}},
	}, pools)

	bad := []struct {
		name, value, wantErr string
	}{
		{"no selector", "gpus: 8", `pool "x": nodeSelector: required`},
		{"negative gpus", "nodeSelector: {a: b}\ngpus: -1", `pool "x": gpus: -1 must be >= 0`},
		{"negative memory", "nodeSelector: {a: b}\ngpuMemory: -1Gi", `pool "x": gpuMemory: -1Gi must be >= 0`},
		{"no limit at all", "nodeSelector: {a: b}", `pool "x": want gpus and/or gpuMemory`},
		{"unknown field", "nodeSelector: {a: b}\ngpu: 8", `pool "x"`},
		{"bad label value", "nodeSelector: {a: 'b c'}\ngpus: 1", `nodeSelector["a"]="b c"`},
		{"not YAML", "{{", `pool "x"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfigMap(map[string]string{"x": tt.value})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestPoolsFromNodes(t *testing.T) {
	mib := int64(1) << 20
	pools := PoolsFromNodes([]Node{
		{Name: "a1", Labels: map[string]string{"pool": "a"}, GPUs: 8, GPUMemoryPerGPU: 81559 * mib},
		{Name: "a2", Labels: map[string]string{"pool": "a"}, GPUs: 8, GPUMemoryPerGPU: 81559 * mib},
		{Name: "b1", Labels: map[string]string{"pool": "b"}, GPUs: 4},
		{Name: "b-cpu", Labels: map[string]string{"pool": "b"}},
		{Name: "unlabelled", GPUs: 8},
	}, "pool")
	assert.Equal(t, []Pool{
		{Name: "a", NodeSelector: labels.Set{"pool": "a"}, Total: Amount{GPUs: 16, GPUMemory: 16 * 81559 * mib}},
		{Name: "b", NodeSelector: labels.Set{"pool": "b"}, Total: Amount{GPUs: 4, GPUMemory: Unlimited}},
	}, pools)
}

func TestAmountString(t *testing.T) {
	assert.Equal(t, "6 GPUs", Amount{GPUs: 6}.String())
	assert.Equal(t, "6 GPUs, 80Gi GPU memory", Amount{GPUs: 6, GPUMemory: 80 * gi}.String())
	assert.Equal(t, "unlimited GPUs, unlimited GPU memory", Amount{GPUs: Unlimited, GPUMemory: Unlimited}.String())
}

func TestFreeGPUs(t *testing.T) {
	usage := map[string]Usage{
		"H100":   {Total: Amount{GPUs: 8}, Allocated: Amount{GPUs: 5}},
		"L4":     {Total: Amount{GPUs: 2}, Allocated: Amount{GPUs: 3}}, // over-committed: none free, never negative
		"memory": {Total: Amount{GPUs: Unlimited, GPUMemory: 1 << 30}},
	}
	assert.Equal(t, decision.Free{"H100": 3, "L4": 0}, FreeGPUs(usage), "a pool without a GPU limit is absent: not limited")
}
