package budget

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagsParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    Flags
		enabled bool
		opts    InformerOptions
	}{
		{nil, Flags{GPUResource: "nvidia.com/gpu"}, false, InformerOptions{ConfigMapNamespace: "ns", GPUResource: "nvidia.com/gpu"}},
		{[]string{"--budget-configmap=gpu-budget"}, Flags{ConfigMap: "gpu-budget", GPUResource: "nvidia.com/gpu"}, true,
			InformerOptions{ConfigMapNamespace: "ns", ConfigMapName: "gpu-budget", GPUResource: "nvidia.com/gpu"}},
		{[]string{"--budget-node-pool-label=nvidia.com/gpu.product", "--gpu-resource=amd.com/gpu"},
			Flags{PoolLabel: "nvidia.com/gpu.product", GPUResource: "amd.com/gpu"}, true,
			InformerOptions{PoolLabel: "nvidia.com/gpu.product", ConfigMapNamespace: "ns", GPUResource: "amd.com/gpu"}},
	}
	for _, tt := range tests {
		f := DefaultFlags()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f.AddFlags(fs)
		require.NoError(t, fs.Parse(tt.args))
		assert.Equal(t, tt.want, f, "%v", tt.args)
		assert.Equal(t, tt.enabled, f.Enabled(), "%v", tt.args)
		assert.Equal(t, tt.opts, f.InformerOptions("ns"), "%v", tt.args)
	}
}

func TestFlagsValidate(t *testing.T) {
	tests := []struct {
		configMap, poolLabel string
		want                 []string
	}{
		{"", "", nil},
		{"gpu-budget", "", nil},
		{"", "nvidia.com/gpu.product", nil},
		{"gpu-budget", "pool", []string{`--budget-configmap="gpu-budget" and --budget-node-pool-label="pool": choose one budget source`}},
		{"", "bad label!", []string{`--budget-node-pool-label="bad label!"`}},
	}
	for _, tt := range tests {
		errs := Flags{ConfigMap: tt.configMap, PoolLabel: tt.poolLabel}.Validate()
		require.Len(t, errs, len(tt.want), "%v", errs)
		for i, w := range tt.want {
			assert.Contains(t, errs[i].Error(), w)
		}
	}
}
