package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/wva-project/wva/pkg/adapter"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision/params"
)

// runAdapterOptions runs `wva adapter args...` through cobra's flag parsing
// and the WVA_* / --config-file layers, and returns the options the
// adapter would start with (no cluster, no servers).
func runAdapterOptions(t *testing.T, args ...string) (*basecmd.AdapterBase, *adapter.Options, error) {
	t.Helper()
	var (
		gotBase *basecmd.AdapterBase
		got     *adapter.Options
	)
	root := &cobra.Command{Use: "wva", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(adapterCommand(func(_ context.Context, base *basecmd.AdapterBase, opts *adapter.Options) error {
		gotBase, got = base, opts
		return nil
	}))
	root.SetArgs(append([]string{"adapter"}, args...))
	err := root.Execute()
	return gotBase, got, err
}

func TestAdapterCommandLayers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "wva.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
saturation:
  analyzerName: saturation
scaleToZero:
  enable_scale_to_zero: false
adapter:
  prometheus-url: https://prometheus.monitoring:9090
  engine-interval: 20s
  status-heartbeat: 5m
  client-burst: 40
  leader-elect: false
controller:
  output: scaledobject
`), 0o600))
	t.Setenv("WVA_CONFIG_FILE", file)
	t.Setenv("WVA_ENGINE_INTERVAL", "10s")
	t.Setenv("WVA_STATUS_HEARTBEAT", "3m")
	t.Setenv("WVA_SCALE_TO_ZERO", "true")

	base, opts, err := runAdapterOptions(t, "--status-heartbeat=1m")
	require.NoError(t, err)
	assert.Equal(t, 40, base.ClientBurst, "the generic API server's flags take the file too")
	assert.False(t, opts.Lease.Enabled, "a boolean flag from the file")
	assert.Equal(t, "https://prometheus.monitoring:9090", opts.PrometheusURL, "config file over the built-in default")
	assert.Equal(t, 10*time.Second, opts.EngineInterval, "environment over config file")
	assert.Equal(t, time.Minute, opts.StatusHeartbeat, "command line over environment")
	assert.Equal(t, 10*time.Second, opts.PrometheusTimeout, "built-in default")

	s := config.NewStore()
	s.Pin(opts.Pinned)
	require.NoError(t, s.Apply(config.ScaleToZeroConfigMapName, map[string]string{"default": "enable_scale_to_zero: false"}))
	r := s.Resolve("meta/llama", "prod")
	assert.True(t, r.ScaleToZero.Enabled, "WVA_SCALE_TO_ZERO over the file and the ConfigMap")
	assert.Equal(t, params.AnalyzerSaturationToken, r.Scaling.AnalyzerName, "file over the built-in default")

	// Invalid values fail the command, naming the variable.
	t.Setenv("WVA_SCALE_TO_ZERO", "yes please")
	_, _, err = runAdapterOptions(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `WVA_SCALE_TO_ZERO="yes please": want true or false`)
	t.Setenv("WVA_SCALE_TO_ZERO", "true")
	t.Setenv("WVA_ENGINE_INTERVAL", "often")
	_, _, err = runAdapterOptions(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `WVA_ENGINE_INTERVAL="often" (--engine-interval)`)
}

// The program sections of one file are independent: each program takes its
// own and rejects an unknown flag in it.
func TestControllerAndScaleFromZeroConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "wva.yaml")
	require.NoError(t, os.WriteFile(file, []byte("scaleFromZero:\n  poll-interval: 0s\ncontroller:\n  workerz: 3\n"), 0o600))

	_, err := run(t, "", "scale-from-zero", "--epp-url=http://epp:9090/metrics", "--config-file="+file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--poll-interval=0s: must be positive", "the file's value reached the options")

	_, err = run(t, "", "controller", "--config-file="+file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "controller.workerz: no such flag")
}

// No flag's WVA_<FLAG> variable may shadow a variable that pins a
// ConfigMap key.
func TestFlagVariablesDoNotShadowKeyVariables(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range config.EnvKeyNames() {
		keys[k] = true
	}
	for _, cmd := range NewRootCommand().Commands() {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			assert.False(t, keys[config.EnvName(f.Name)], "wva %s --%s is set by %s, which pins a ConfigMap key", cmd.Name(), f.Name, config.EnvName(f.Name))
		})
	}
}
