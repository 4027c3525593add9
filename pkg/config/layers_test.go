package config

import (
	"errors"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
)

// testFlags is a program's flag set: a duration, an int, a list and the
// config file flag, with their built-in defaults.
type testFlags struct {
	interval time.Duration
	workers  int
	urls     []string
	fs       *pflag.FlagSet
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: pflag.NewFlagSet("adapter", pflag.ContinueOnError)}
	f.fs.DurationVar(&f.interval, "engine-interval", 30*time.Second, "")
	f.fs.IntVar(&f.workers, "workers", 2, "")
	f.fs.StringArrayVar(&f.urls, "epp-url", nil, "")
	f.fs.String(ConfigFileFlag, "", "")
	return f
}

func envOf(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func filesOf(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := m[p]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("open " + p + ": no such file or directory")
	}
}

const layersFile = `
adapter:
  engine-interval: 20s
  workers: 4
  epp-url: [http://a:9090/metrics, http://b:9090/metrics]
controller:
  no-such-flag-here: 1
`

func TestLoadFlagLayers(t *testing.T) {
	files := filesOf(map[string]string{"/etc/wva/config.yaml": layersFile})
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		interval time.Duration
		workers  int
		urls     []string
	}{
		{name: "built-in defaults", interval: 30 * time.Second, workers: 2},
		{name: "config file over defaults", args: []string{"--config-file=/etc/wva/config.yaml"},
			interval: 20 * time.Second, workers: 4, urls: []string{"http://a:9090/metrics", "http://b:9090/metrics"}},
		{name: "config file named by WVA_CONFIG_FILE", env: map[string]string{"WVA_CONFIG_FILE": "/etc/wva/config.yaml"},
			interval: 20 * time.Second, workers: 4, urls: []string{"http://a:9090/metrics", "http://b:9090/metrics"}},
		{name: "environment over config file", args: []string{"--config-file=/etc/wva/config.yaml"},
			env:      map[string]string{"WVA_ENGINE_INTERVAL": "10s", "WVA_EPP_URL": "http://c/metrics,http://d/metrics"},
			interval: 10 * time.Second, workers: 4, urls: []string{"http://c/metrics", "http://d/metrics"}},
		{name: "flags over environment", args: []string{"--config-file=/etc/wva/config.yaml", "--engine-interval=5s", "--epp-url=http://e/metrics"},
			env:      map[string]string{"WVA_ENGINE_INTERVAL": "10s", "WVA_EPP_URL": "http://c/metrics", "WVA_WORKERS": "8"},
			interval: 5 * time.Second, workers: 8, urls: []string{"http://e/metrics"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			require.NoError(t, f.fs.Parse(tc.args))
			_, err := Load(ProgramAdapter, f.fs, envOf(tc.env), files)
			require.NoError(t, err)
			assert.Equal(t, tc.interval, f.interval)
			assert.Equal(t, tc.workers, f.workers)
			assert.Equal(t, tc.urls, f.urls)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	files := filesOf(map[string]string{
		"ok.yaml":        layersFile,
		"typo.yaml":      "adapter:\n  engine-intervall: 20s\n",
		"badvalue.yaml":  "adapter:\n  engine-interval: soon\n",
		"section.yaml":   "saturaton:\n  kvCacheThreshold: 0.9\n",
		"key.yaml":       "saturation:\n  kvCacheTreshold: 0.9\n",
		"perModel.yaml":  "scaleToZero:\n  model_id: meta/llama\n  enable_scale_to_zero: true\n",
		"range.yaml":     "saturation:\n  sloAttainment: 2\n",
		"retention.yaml": "scaleToZero:\n  retention_period: 5s\n",
		"notyaml.yaml":   "adapter: [",
	})
	cases := []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"unreadable file", "missing.yaml", nil, []string{"--config-file", "missing.yaml", "no such file"}},
		{"unparsable file", "notyaml.yaml", nil, []string{"--config-file notyaml.yaml"}},
		{"unknown section", "section.yaml", nil, []string{"--config-file section.yaml", `unknown field "saturaton"`}},
		{"unknown key", "key.yaml", nil, []string{"--config-file key.yaml: saturation", `unknown field "kvCacheTreshold"`}},
		{"unknown flag", "typo.yaml", nil, []string{"--config-file typo.yaml: adapter.engine-intervall: no such flag"}},
		{"bad flag value in file", "badvalue.yaml", nil, []string{"--config-file badvalue.yaml: adapter.engine-interval", "soon"}},
		{"per-model key in file", "perModel.yaml", nil, []string{"scaleToZero.model_id", "belong in the ConfigMaps"}},
		{"out of range in file", "range.yaml", nil, []string{"--config-file range.yaml: saturation.sloAttainment=2: must be in [0.5, 0.9999]"}},
		{"retention too short in file", "retention.yaml", nil, []string{"--config-file retention.yaml: scaleToZero.retention_period=5s"}},
		{"bad flag variable", "", map[string]string{"WVA_WORKERS": "many"}, []string{`WVA_WORKERS="many" (--workers)`}},
		{"bad bool variable", "", map[string]string{"WVA_SCALE_TO_ZERO": "maybe"}, []string{`WVA_SCALE_TO_ZERO="maybe": want true or false`}},
		{"bad number variable", "", map[string]string{"WVA_SLO_TARGET_TTFT": "2s"}, []string{`WVA_SLO_TARGET_TTFT="2s": want a finite number`}},
		{"bad duration variable", "", map[string]string{"WVA_SCALE_TO_ZERO_RETENTION_PERIOD": "600"}, []string{`WVA_SCALE_TO_ZERO_RETENTION_PERIOD="600": want a duration`}},
		{"out of range variable", "ok.yaml", map[string]string{"WVA_SLO_ATTAINMENT": "1.5"}, []string{"WVA_SLO_ATTAINMENT: saturation.sloAttainment=1.5"}},
		{"unknown analyzer variable", "", map[string]string{"WVA_ANALYZER_NAME": "magic"}, []string{"WVA_ANALYZER_NAME: saturation.analyzerName=magic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			var args []string
			if tc.file != "" {
				args = []string{"--config-file=" + tc.file}
			}
			require.NoError(t, f.fs.Parse(args))
			_, err := Load(ProgramAdapter, f.fs, envOf(tc.env), files)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestPinnedLayers: env over file over the ConfigMaps (default and
// override entries, global and namespace-local) over built-in defaults.
func TestPinnedLayers(t *testing.T) {
	files := filesOf(map[string]string{"pins.yaml": `
saturation:
  analyzerName: saturation
  targetTTFT: 1500
scaleToZero:
  enable_scale_to_zero: true
  retention_period: 15m
`})
	configMaps := func(s *Store) {
		require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{
			"default": "analyzerName: saturation-percentage\ntargetTTFT: 3000\nkvCacheThreshold: 0.9",
			"llama":   "model_id: meta/llama\ntargetITL: 50\nanalyzerName: slo-planner",
		}))
		require.NoError(t, s.Apply(ScaleToZeroConfigMapName, map[string]string{
			"default": "enable_scale_to_zero: false\nretention_period: 20m",
		}))
	}
	type want struct {
		analyzer  string
		ttft, itl float64
		kv        float64
		zero      bool
		retention time.Duration
		source    string
	}
	cases := []struct {
		name       string
		configMaps bool
		file       string
		env        map[string]string
		model      string
		want       want
	}{
		{name: "built-in defaults", model: "meta/llama",
			want: want{params.AnalyzerSLOPlanner, 2000, 100, 0.8, false, 10 * time.Minute, "built-in defaults"}},
		{name: "ConfigMap default over built-in", configMaps: true, model: "other",
			want: want{params.AnalyzerSaturationPercentage, 3000, 100, 0.9, false, 20 * time.Minute, "default"}},
		{name: "ConfigMap override over its default", configMaps: true, model: "meta/llama",
			want: want{params.AnalyzerSLOPlanner, 3000, 50, 0.9, false, 20 * time.Minute, "llama"}},
		{name: "config file over ConfigMap default and override", configMaps: true, file: "pins.yaml", model: "meta/llama",
			// Keys the file does not pin still come from the entries.
			want: want{params.AnalyzerSaturationToken, 1500, 50, 0.9, true, 15 * time.Minute, "llama + pinned settings"}},
		{name: "environment over config file", configMaps: true, file: "pins.yaml", model: "other",
			env:  map[string]string{"WVA_SCALE_TO_ZERO": "false", "WVA_SLO_TARGET_TTFT": "800", "WVA_ANALYZER_NAME": "slo-planner", "WVA_SCALE_TO_ZERO_RETENTION_PERIOD": "1h"},
			want: want{params.AnalyzerSLOPlanner, 800, 100, 0.9, false, time.Hour, "default + pinned settings"}},
		{name: "environment alone over built-in", model: "meta/llama",
			env:  map[string]string{"WVA_SCALE_TO_ZERO": "true", "WVA_SLO_TARGET_ITL": "40", "WVA_SLO_STARTUP_DELAY": "2m"},
			want: want{params.AnalyzerSLOPlanner, 2000, 40, 0.8, true, 10 * time.Minute, "built-in defaults + pinned settings"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			if tc.file != "" {
				require.NoError(t, f.fs.Parse([]string{"--config-file=" + tc.file}))
			}
			p, err := Load(ProgramAdapter, f.fs, envOf(tc.env), files)
			require.NoError(t, err)
			s := NewStore()
			s.Pin(p)
			if tc.configMaps {
				configMaps(s)
			}
			r := s.Resolve(tc.model, "prod")
			got := want{r.Scaling.AnalyzerName, r.SLO.TargetTTFTms, r.SLO.TargetITLms,
				r.Scaling.KvCacheThreshold, r.ScaleToZero.Enabled, r.ScaleToZero.RetentionPeriod.D(), r.SaturationSource}
			assert.Equal(t, tc.want, got)
			if d, ok := tc.env["WVA_SLO_STARTUP_DELAY"]; ok {
				want, _ := time.ParseDuration(d)
				assert.Equal(t, want, r.SLO.StartupDelay.D())
			}
		})
	}
}

// A ConfigMap entry inconsistent with a pinned key is skipped, in the
// global and the namespace-local resolution alike; the pin holds.
func TestPinnedSkipsInconsistentEntries(t *testing.T) {
	f := newTestFlags()
	p, err := Load(ProgramAdapter, f.fs, envOf(nil), filesOf(nil))
	require.NoError(t, err)
	require.Empty(t, p.Keys)
	f = newTestFlags()
	require.NoError(t, f.fs.Parse([]string{"--config-file=p.yaml"}))
	p, err = Load(ProgramAdapter, f.fs, envOf(nil), filesOf(map[string]string{"p.yaml": "saturation:\n  kvCacheThreshold: 0.5\n"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"saturation.kvCacheThreshold=0.5 (--config-file p.yaml)"}, p.Keys)

	s := NewStore()
	s.Pin(p)
	// kvSpareTrigger 0.6 is valid under the built-in 0.8 but not under the pinned 0.5.
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{
		"default": "kvSpareTrigger: 0.6\nqueueLengthThreshold: 7",
		"llama":   "model_id: meta/llama\nkvSpareTrigger: 0.3",
	}))
	r := s.Resolve("other", "prod")
	assert.Equal(t, 0.5, r.Scaling.KvCacheThreshold)
	assert.Equal(t, 0.10, r.Scaling.KvSpareTrigger)
	assert.Equal(t, 5.0, r.Scaling.QueueLengthThreshold)
	assert.Contains(t, r.SaturationSource, `"default" inconsistent with pinned settings, ignored`)
	r = s.Resolve("meta/llama", "prod")
	assert.Equal(t, 0.3, r.Scaling.KvSpareTrigger)
	assert.Equal(t, "llama + pinned settings", r.SaturationSource)

	require.NoError(t, s.ApplyNamespace("prod", SaturationConfigMapName, map[string]string{"default": "kvSpareTrigger: 0.55"}))
	r = s.Resolve("other", "prod")
	assert.Equal(t, 0.5, r.Scaling.KvCacheThreshold)
	assert.Equal(t, 0.10, r.Scaling.KvSpareTrigger)
	assert.Contains(t, r.SaturationSource, "inconsistent with the layers below, ignored")
	assert.Contains(t, r.SaturationSource, "+ pinned settings")
}
