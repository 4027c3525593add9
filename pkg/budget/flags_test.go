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
		{nil, Flags{GPUResource: "nvidia.com/gpu", Unbudgeted: "unlimited"}, false, InformerOptions{ConfigMapNamespace: "ns", GPUResource: "nvidia.com/gpu"}},
		{[]string{"--budget-configmap=gpu-budget"}, Flags{ConfigMap: "gpu-budget", GPUResource: "nvidia.com/gpu", Unbudgeted: "unlimited"}, true,
			InformerOptions{ConfigMapNamespace: "ns", ConfigMapName: "gpu-budget", GPUResource: "nvidia.com/gpu"}},
		{[]string{"--budget-node-pool-label=nvidia.com/gpu.product", "--gpu-resource=amd.com/gpu", "--unbudgeted-variants=refuse"},
			Flags{PoolLabel: "nvidia.com/gpu.product", GPUResource: "amd.com/gpu", Unbudgeted: "refuse"}, true,
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
		configMap, poolLabel, unbudgeted string
		want                             []string
	}{
		{"", "", "unlimited", nil},
		{"gpu-budget", "", "refuse", nil},
		{"", "nvidia.com/gpu.product", "unlimited", nil},
		{"gpu-budget", "pool", "unlimited", []string{`--budget-configmap="gpu-budget" and --budget-node-pool-label="pool": choose one budget source`}},
		{"", "bad label!", "unlimited", []string{`--budget-node-pool-label="bad label!"`}},
		{"", "", "Refuse", []string{`--unbudgeted-variants="Refuse": want unlimited or refuse`}},
		{"", "", "", []string{`--unbudgeted-variants="": want unlimited or refuse`}},
	}
	for _, tt := range tests {
		errs := Flags{ConfigMap: tt.configMap, PoolLabel: tt.poolLabel, Unbudgeted: tt.unbudgeted}.Validate()
		require.Len(t, errs, len(tt.want), "%v", errs)
		for i, w := range tt.want {
			assert.Contains(t, errs[i].Error(), w)
		}
	}
}
