package config

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func TestBuiltInDefaultsWithoutConfigMaps(t *testing.T) {
	r := NewStore().Resolve("meta/llama-70b", "prod")
	assert.Equal(t, params.DefaultScaling(), r.Scaling)
	assert.Equal(t, params.DefaultSLO(), r.SLO)
	assert.Equal(t, "built-in defaults", r.SaturationSource)
	assert.Equal(t, 0.80, r.Scaling.KvCacheThreshold)
	assert.Equal(t, 5.0, r.Scaling.QueueLengthThreshold)
	assert.Equal(t, 0.10, r.Scaling.KvSpareTrigger)
	assert.Equal(t, 3.0, r.Scaling.QueueSpareTrigger)
	assert.Equal(t, 0.85, r.Scaling.ScaleUpThreshold)
	assert.Equal(t, 0.70, r.Scaling.ScaleDownBoundary)
	assert.Equal(t, 10*time.Minute, r.ScaleToZero.RetentionPeriod.D())
	assert.False(t, r.ScaleToZero.Enabled)
	assert.Nil(t, r.QueueingModel)
	assert.Equal(t, params.AnalyzerSLOPlanner, r.Analyzer())
}

// The slo-planner is the analyzer wherever no entry names one; the
// percentage analyzer runs only where an entry selects it.
func TestDefaultAnalyzerIsThePlanner(t *testing.T) {
	cases := []struct {
		name    string
		entries map[string]string // wva-saturation-scaling-config; nil: no ConfigMap
		want    string
	}{
		{"no ConfigMap", nil, params.AnalyzerSLOPlanner},
		{"default entry without analyzerName", map[string]string{DefaultKey: "kvCacheThreshold: 0.9"}, params.AnalyzerSLOPlanner},
		{"empty analyzerName", map[string]string{DefaultKey: `analyzerName: ""`}, params.AnalyzerSLOPlanner},
		{"percentage by name", map[string]string{DefaultKey: "analyzerName: saturation-percentage"}, params.AnalyzerSaturationPercentage},
		{"percentage for the model only", map[string]string{
			"llama": "model_id: meta/llama-70b\nanalyzerName: saturation-percentage"}, params.AnalyzerSaturationPercentage},
		{"percentage elsewhere", map[string]string{
			"granite": "model_id: ibm/granite\nanalyzerName: saturation-percentage"}, params.AnalyzerSLOPlanner},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			if tc.entries != nil {
				require.NoError(t, s.Apply(SaturationConfigMapName, tc.entries))
			}
			r := s.Resolve("meta/llama-70b", "prod")
			assert.Equal(t, tc.want, r.Analyzer())
			// The percentage analyzer's thresholds keep their defaults.
			assert.Equal(t, 5.0, r.Scaling.QueueLengthThreshold)
		})
	}
}

func TestResolveLookupOrder(t *testing.T) {
	data := map[string]string{
		"default":                   "kvCacheThreshold: 0.85\nkvSpareTrigger: 0.12",
		"meta/llama-70b#prod":       "kvCacheThreshold: 0.90",
		"llama-prod":                "model_id: meta/llama-70b\nnamespace: prod\nkvCacheThreshold: 0.70",
		"llama-staging":             "model_id: meta/llama-70b\nnamespace: staging\nkvCacheThreshold: 0.75",
		"llama-any-namespace":       "model_id: meta/llama-70b\nqueueLengthThreshold: 8",
		"granite-any-namespace":     "model_id: ibm/granite\nqueueLengthThreshold: 9",
		"granite-any-namespace-too": "model_id: ibm/granite\nqueueLengthThreshold: 7",
	}
	s := NewStore()
	require.NoError(t, s.Apply(SaturationConfigMapName, data))
	cases := []struct {
		model, ns string
		source    string
		kv, queue float64
		kvTrigger float64
	}{
		{"meta/llama-70b", "prod", "meta/llama-70b#prod", 0.90, 5, 0.12},
		{"meta/llama-70b", "staging", "llama-staging", 0.75, 5, 0.12},
		{"meta/llama-70b", "dev", "llama-any-namespace", 0.85, 8, 0.12},
		{"ibm/granite", "dev", "granite-any-namespace", 0.85, 9, 0.12},
		{"other/model", "prod", "default", 0.85, 5, 0.12},
	}
	for _, tc := range cases {
		t.Run(tc.model+"/"+tc.ns, func(t *testing.T) {
			r := s.Resolve(tc.model, tc.ns)
			assert.Equal(t, tc.source, r.SaturationSource)
			assert.Equal(t, tc.kv, r.Scaling.KvCacheThreshold)
			assert.Equal(t, tc.queue, r.Scaling.QueueLengthThreshold)
			// Fields an override does not set come from the default entry.
			assert.Equal(t, tc.kvTrigger, r.Scaling.KvSpareTrigger)
		})
	}
}

func TestApplyValidation(t *testing.T) {
	cases := []struct {
		name      string
		configMap string
		entry     string
		wantErr   string
	}{
		{"valid full entry", SaturationConfigMapName, "kvCacheThreshold: 0.8\nqueueLengthThreshold: 5\nkvSpareTrigger: 0.1\nqueueSpareTrigger: 3", ""},
		{"upstream token analyzer name", SaturationConfigMapName, "analyzerName: saturation\nscaleUpThreshold: 0.9\nscaleDownBoundary: 0.6", ""},
		{"kv threshold above 1", SaturationConfigMapName, "kvCacheThreshold: 1.5", "kvCacheThreshold=1.5: must be in (0, 1]"},
		{"kv threshold zero", SaturationConfigMapName, "kvCacheThreshold: 0", "kvCacheThreshold=0: must be in (0, 1]"},
		{"trigger not below threshold", SaturationConfigMapName, "kvSpareTrigger: 0.8", "kvSpareTrigger=0.8: must be in [0, kvCacheThreshold=0.8)"},
		{"negative queue trigger", SaturationConfigMapName, "queueSpareTrigger: -1", "queueSpareTrigger=-1"},
		{"huge queue threshold", SaturationConfigMapName, "queueLengthThreshold: 1e308\nqueueSpareTrigger: 1e307", "queueLengthThreshold=1e+308: must be in (0, 1e+06]"},
		{"queue threshold at the limit", SaturationConfigMapName, "queueLengthThreshold: 1e6", ""},
		{"queue trigger above threshold", SaturationConfigMapName, "queueLengthThreshold: 2\nqueueSpareTrigger: 3", "must be in [0, queueLengthThreshold=2)"},
		{"boundary above up threshold", SaturationConfigMapName, "scaleUpThreshold: 0.6\nscaleDownBoundary: 0.7", "scaleDownBoundary=0.7: must be in (0, scaleUpThreshold=0.6)"},
		{"priority zero", SaturationConfigMapName, "priority: 0", "priority=0: must be > 0"},
		{"stabilization window", SaturationConfigMapName, "scaleDownStabilizationCycles: 10", ""},
		{"negative stabilization window", SaturationConfigMapName, "scaleDownStabilizationCycles: -1", "scaleDownStabilizationCycles=-1: must be in [0, 240]"},
		{"stabilization window too long", SaturationConfigMapName, "scaleDownStabilizationCycles: 241", "scaleDownStabilizationCycles=241"},
		{"backlog drain", SaturationConfigMapName, "backlogDrainSeconds: 240", ""},
		{"negative backlog drain", SaturationConfigMapName, "backlogDrainSeconds: -1", "backlogDrainSeconds=-1: must be >= 0"},
		{"unknown analyzer", SaturationConfigMapName, "analyzerName: magic", "analyzerName=magic"},
		{"typo in field name", SaturationConfigMapName, "kvCacheThreshhold: 0.7", "unknown field"},
		{"not YAML", SaturationConfigMapName, "kvCacheThreshold: [", "cannot parse"},
		{"wrong type", SaturationConfigMapName, "kvCacheThreshold: high", "cannot parse"},
		{"valid scale to zero", ScaleToZeroConfigMapName, "enable_scale_to_zero: true\nretention_period: 5m", ""},
		{"bad duration", ScaleToZeroConfigMapName, "retention_period: soon", `want a duration string such as "10m", got "soon"`},
		{"zero retention", ScaleToZeroConfigMapName, "retention_period: 0s", "retention_period=0s: must be a duration of at least 1m0s"},
		{"negative retention", ScaleToZeroConfigMapName, "retention_period: -5m", "retention_period=-5m0s: must be a duration of at least 1m0s"},
		{"retention below a minute", ScaleToZeroConfigMapName, "retention_period: 59s", "retention_period=59s: must be a duration of at least 1m0s"},
		{"retention of 1ns (Prometheus would answer [1s] with nothing)", ScaleToZeroConfigMapName, "retention_period: 1ns",
			"retention_period=1ns: must be a duration of at least 1m0s such as \"10m\": idle detection counts requests with increase() over it, which needs 2 scrapes at a scrape interval of up to 30s"},
		{"retention of exactly a minute", ScaleToZeroConfigMapName, "retention_period: 1m", ""},
		{"numeric retention", ScaleToZeroConfigMapName, "retention_period: 600", "want a duration string"},
		{"valid queueing model", QueueingModelConfigMapName, "sloMultiplier: 2.5\ntargetTTFT: 500\ntargetITL: 50", ""},
		{"slo multiplier 1", QueueingModelConfigMapName, "sloMultiplier: 1", "sloMultiplier=1: must be a finite number > 1"},
		{"negative ttft", QueueingModelConfigMapName, "targetTTFT: -5", "targetTTFT=-5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := NewStore().Apply(tc.configMap, map[string]string{DefaultKey: tc.entry})
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Contains(t, err.Error(), tc.configMap+`: entry "default"`)
			var entryErr *EntryError
			assert.True(t, errors.As(err, &entryErr))
		})
	}
}

func TestInvalidEntryKeepsLastValid(t *testing.T) {
	s := NewStore()
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{
		DefaultKey:  "kvCacheThreshold: 0.9",
		"llama":     "model_id: meta/llama\nqueueLengthThreshold: 8",
		"to-remove": "model_id: gone\nqueueLengthThreshold: 9",
	}))
	err := s.Apply(SaturationConfigMapName, map[string]string{
		DefaultKey: "kvCacheThreshold: 7",                // invalid: previous kept
		"llama":    "model_id: meta/llama\npriority: -1", // invalid: previous kept
		"new-bad":  "model_id: new\nkvSpareTrigger: 2",   // invalid, nothing to keep
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `entry "default": kvCacheThreshold=7: must be in (0, 1] (previous valid entry kept)`)
	assert.Contains(t, err.Error(), `entry "new-bad"`)
	assert.Contains(t, err.Error(), "(entry ignored)")

	assert.Equal(t, 0.9, s.Resolve("x", "y").Scaling.KvCacheThreshold)
	llama := s.Resolve("meta/llama", "y")
	assert.Equal(t, "llama", llama.SaturationSource)
	assert.Equal(t, 8.0, llama.Scaling.QueueLengthThreshold)
	assert.Equal(t, "default", s.Resolve("gone", "y").SaturationSource, "a key removed from the ConfigMap is forgotten")
	assert.Equal(t, "default", s.Resolve("new", "y").SaturationSource)

	s.Remove(SaturationConfigMapName)
	assert.Equal(t, params.DefaultScaling(), s.Resolve("meta/llama", "y").Scaling)
	assert.Equal(t, params.DefaultSLO(), s.Resolve("meta/llama", "y").SLO)
}

func TestOverrideValidatedAgainstDefault(t *testing.T) {
	s := NewStore()
	// The override alone is fine against built-ins (0.7 < 0.8) but the
	// default lowers the threshold to 0.5, so kvSpareTrigger 0.6 is invalid.
	err := s.Apply(SaturationConfigMapName, map[string]string{
		DefaultKey: "kvCacheThreshold: 0.5",
		"llama":    "model_id: meta/llama\nkvSpareTrigger: 0.6",
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `entry "llama": kvSpareTrigger=0.6: must be in [0, kvCacheThreshold=0.5)`)
}

func TestOverrideInconsistentWithNewDefaultIsIgnored(t *testing.T) {
	s := NewStore()
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{"llama": "model_id: meta/llama\nkvSpareTrigger: 0.6"}))
	// The new default lowers the threshold: the override is rejected, its
	// previous version is kept, and at resolve time it no longer fits.
	err := s.Apply(SaturationConfigMapName, map[string]string{
		DefaultKey: "kvCacheThreshold: 0.5",
		"llama":    "model_id: meta/llama\nkvSpareTrigger: 0.6",
	})
	require.Error(t, err)
	r := s.Resolve("meta/llama", "ns")
	assert.Equal(t, 0.5, r.Scaling.KvCacheThreshold)
	assert.Equal(t, 0.10, r.Scaling.KvSpareTrigger)
	assert.Contains(t, r.SaturationSource, `override "llama" inconsistent with default, ignored`)
	require.NoError(t, saturation{r.Scaling, r.SLO}.Validate())
}

func TestScaleToZeroAndQueueingResolution(t *testing.T) {
	s := NewStore()
	require.NoError(t, s.Apply(ScaleToZeroConfigMapName, map[string]string{
		DefaultKey:       "enable_scale_to_zero: true\nretention_period: 10m",
		"llama-override": "model_id: meta/llama-3.1-8b\nenable_scale_to_zero: false",
	}))
	r := s.Resolve("meta/llama-3.1-8b", "any")
	assert.False(t, r.ScaleToZero.Enabled)
	assert.Equal(t, 10*time.Minute, r.ScaleToZero.RetentionPeriod.D(), "retention inherited from default")
	assert.True(t, s.Resolve("other", "any").ScaleToZero.Enabled)

	assert.Nil(t, s.Resolve("other", "any").QueueingModel)
	require.NoError(t, s.Apply(QueueingModelConfigMapName, map[string]string{
		"llama-slo": "model_id: meta/llama-3.1-8b\nnamespace: llm-inference\ntargetTTFT: 500\ntargetITL: 100",
	}))
	assert.Nil(t, s.Resolve("other", "any").QueueingModel, "no default entry: only the named model uses the SLO analyzer")
	qm := s.Resolve("meta/llama-3.1-8b", "llm-inference")
	require.NotNil(t, qm.QueueingModel)
	assert.Equal(t, 500.0, qm.QueueingModel.TargetTTFTms)
	assert.Equal(t, 3.0, qm.QueueingModel.SLOMultiplier)
	assert.Equal(t, params.AnalyzerQueueingModel, qm.Analyzer())
}

func TestApplyUnknownConfigMap(t *testing.T) {
	err := NewStore().Apply("something-else", map[string]string{DefaultKey: ""})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown ConfigMap "something-else"`)
}

func TestNormalizeAnalyzerName(t *testing.T) {
	for in, want := range map[string]string{
		"":                      params.AnalyzerSLOPlanner,
		"slo-planner":           params.AnalyzerSLOPlanner,
		"saturation-percentage": params.AnalyzerSaturationPercentage,
		"saturation":            params.AnalyzerSaturationToken,
		"saturation-token":      params.AnalyzerSaturationToken,
		"queueing-model":        params.AnalyzerQueueingModel,
		"other":                 "other",
	} {
		assert.Equal(t, want, NormalizeAnalyzerName(in), in)
	}
}

// FuzzApply: no entry text may panic the parser, and whatever is accepted
// resolves to a configuration that passes validation.
func FuzzApply(f *testing.F) {
	f.Add("kvCacheThreshold: 0.8\nqueueLengthThreshold: 5", "model_id: m\nkvSpareTrigger: 0.2", "retention_period: 5m")
	f.Add("{}", "model_id: [", "enable_scale_to_zero: yes")
	f.Add("analyzerName: saturation\nscaleUpThreshold: .nan", "priority: 1e309", "retention_period: -1h")
	f.Add("queueLengthThreshold: 1e308\nqueueSpareTrigger: 1e307", "model_id: m\n---\nkvSpareTrigger: !x 0.2", "retention_period: 100000000h")
	f.Fuzz(func(t *testing.T, def, override, stz string) {
		s := NewStore()
		_ = s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: def, "o": override})
		_ = s.Apply(ScaleToZeroConfigMapName, map[string]string{DefaultKey: stz})
		_ = s.Apply(QueueingModelConfigMapName, map[string]string{"o": override})
		r := s.Resolve("m", "ns")
		require.NoError(t, saturation{r.Scaling, r.SLO}.Validate())
		require.NoError(t, scaleToZero(r.ScaleToZero).Validate())
		if r.QueueingModel != nil {
			require.NoError(t, queueingModel(*r.QueueingModel).Validate())
		}
	})
}

// A fresh process (restart, new leader) has no in-memory last valid entry:
// a broken entry falls back to the persisted one, whichever arrives first.
func TestBrokenEntryFallsBackToLastGood(t *testing.T) {
	sat := func(key string) string { return LastGoodKey(SaturationConfigMapName, key) }
	broken := map[string]string{DefaultKey: "kvCacheThreshold: 7"}
	cases := []struct {
		name     string
		steps    func(s *Store) error
		wantKv   float64
		kept     bool
		restored bool
	}{
		{"persisted seen first", func(s *Store) error {
			s.SetLastGood(map[string]string{sat(DefaultKey): "kvCacheThreshold: 0.55\nkvSpareTrigger: 0.10"})
			return s.Apply(SaturationConfigMapName, broken)
		}, 0.55, true, true},
		{"persisted seen after the broken ConfigMap", func(s *Store) error {
			err := s.Apply(SaturationConfigMapName, broken)
			s.SetLastGood(map[string]string{sat(DefaultKey): "kvCacheThreshold: 0.55\nkvSpareTrigger: 0.10"})
			return err
		}, 0.55, true, true},
		{"persisted entry itself invalid", func(s *Store) error {
			s.SetLastGood(map[string]string{sat(DefaultKey): "kvCacheThreshold: 2"})
			return s.Apply(SaturationConfigMapName, broken)
		}, 0.80, false, false},
		{"persisted entry of another ConfigMap", func(s *Store) error {
			s.SetLastGood(map[string]string{LastGoodKey(ScaleToZeroConfigMapName, DefaultKey): "kvCacheThreshold: 0.55"})
			return s.Apply(SaturationConfigMapName, broken)
		}, 0.80, false, false},
		{"in-memory last valid entry wins over the persisted one", func(s *Store) error {
			require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: "kvCacheThreshold: 0.6"}))
			s.SetLastGood(map[string]string{sat(DefaultKey): "kvCacheThreshold: 0.55"})
			return s.Apply(SaturationConfigMapName, broken)
		}, 0.60, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			err := tc.steps(s)
			var ee *EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tc.wantKv, s.Resolve("m", "ns").Scaling.KvCacheThreshold)
			// The state after SetLastGood, not the first apply's.
			invalid := s.Invalid()
			require.Len(t, invalid, 1)
			assert.Equal(t, tc.kept, invalid[0].Kept)
			assert.Equal(t, tc.restored, invalid[0].Restored)
			assert.Contains(t, invalid[0].Error(), "kvCacheThreshold=7: must be in (0, 1]")
			if tc.kept {
				// What the leader persists keeps the version in force, so a
				// new leader does not erase it.
				assert.Contains(t, s.LastGood()[sat(DefaultKey)], "kvCacheThreshold: 0.")
			} else {
				assert.NotContains(t, s.LastGood(), sat(DefaultKey))
			}
		})
	}
}

func TestLastGoodMirrorsEntriesInForce(t *testing.T) {
	s := NewStore()
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: "kvCacheThreshold: 0.55", "llama": "model_id: m\nkvCacheThreshold: 0.7"}))
	require.NoError(t, s.Apply(ScaleToZeroConfigMapName, map[string]string{DefaultKey: "retention_period: 5m"}))
	assert.Equal(t, map[string]string{
		"wva-saturation-scaling-config.default":  "kvCacheThreshold: 0.55",
		"wva-saturation-scaling-config.llama":    "model_id: m\nkvCacheThreshold: 0.7",
		"wva-model-scale-to-zero-config.default": "retention_period: 5m",
	}, s.LastGood())
	// A removed key or ConfigMap leaves the persisted set too; a fixed
	// entry clears its invalid state.
	require.Error(t, s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: "kvCacheThreshold: 7"}))
	require.Len(t, s.Invalid(), 1)
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: "kvCacheThreshold: 0.65"}))
	s.Remove(ScaleToZeroConfigMapName)
	assert.Equal(t, map[string]string{"wva-saturation-scaling-config.default": "kvCacheThreshold: 0.65"}, s.LastGood())
	assert.Empty(t, s.Invalid())
}

func TestInvalidForScopesBrokenEntries(t *testing.T) {
	s := NewStore()
	err := s.Apply(SaturationConfigMapName, map[string]string{
		"llama":              "model_id: meta/llama\nnamespace: prod\nkvCacheThreshold: 3",
		"granite":            "model_id: ibm/granite\nkvCacheThreshold: 3",
		"garbled":            "model_id: [unterminated",
		"meta/qwen#dev":      "kvCacheThreshold: 3",
		"valid-for-everyone": "model_id: x/y\nkvCacheThreshold: 0.7",
	})
	require.Error(t, err)
	keys := func(model, ns string) []string {
		var out []string
		for _, e := range s.InvalidFor(model, ns) {
			out = append(out, e.Key)
		}
		return out
	}
	cases := []struct {
		model, ns string
		want      []string
	}{
		{"meta/llama", "prod", []string{"garbled", "llama"}},
		{"meta/llama", "dev", []string{"garbled"}},
		{"ibm/granite", "any", []string{"garbled", "granite"}},
		{"meta/qwen", "dev", []string{"garbled", "meta/qwen#dev"}},
		{"x/y", "prod", []string{"garbled"}},
	}
	for _, tc := range cases {
		t.Run(tc.model+"/"+tc.ns, func(t *testing.T) { assert.ElementsMatch(t, tc.want, keys(tc.model, tc.ns)) })
	}
	// A broken default concerns every model.
	require.Error(t, s.Apply(ScaleToZeroConfigMapName, map[string]string{DefaultKey: "retention_period: 1s"}))
	assert.Contains(t, keys("x/y", "prod"), DefaultKey)
}

// The retention floor is the collector's rate window (decision.RateWindow):
// the scrapes its queries are sized for. A longer rate window (a slower
// scrape) must raise the floor with it. (The collector's tests check its
// idle window at this floor; importing the collector here would put
// client-go into this package's fuzz build.)
func TestMinRetentionPeriodIsTheRateWindow(t *testing.T) {
	assert.Equal(t, decision.RateWindow, MinRetentionPeriod)
	assert.Equal(t, decision.RateWindow, time.Duration(MinRetentionScrapes)*MaxScrapeInterval)
}

// Without entries, Resolve is params.Defaults, sourced from the built-in
// defaults.
func TestResolveWithoutEntriesIsParamsDefaults(t *testing.T) {
	want := params.Defaults()
	want.SaturationSource, want.ScaleToZeroSource = "built-in defaults", "built-in defaults"
	assert.Equal(t, want, NewStore().Resolve("m", "ns"))
}

// The entry formats are upstream's: every key lands in its resolved field.
func TestEntryKeysResolve(t *testing.T) {
	s := NewStore()
	require.NoError(t, s.Apply(SaturationConfigMapName, map[string]string{DefaultKey: `
analyzerName: saturation
kvCacheThreshold: 0.7
queueLengthThreshold: 6
kvSpareTrigger: 0.2
queueSpareTrigger: 4
scaleUpThreshold: 0.9
scaleDownBoundary: 0.6
scaleDownStabilizationCycles: 7
backlogDrainSeconds: 120
enableLimiter: true
priority: 2
targetTTFT: 1500
targetITL: 40
sloAttainment: 0.95
startupDelay: 3m`}))
	require.NoError(t, s.Apply(ScaleToZeroConfigMapName, map[string]string{DefaultKey: "enable_scale_to_zero: true\nretention_period: 20m"}))
	require.NoError(t, s.Apply(QueueingModelConfigMapName, map[string]string{DefaultKey: "sloMultiplier: 4\ntuningEnabled: false\ntargetTTFT: 800\ntargetITL: 30"}))
	r := s.Resolve("m", "ns")
	assert.Equal(t, params.Scaling{AnalyzerName: params.AnalyzerSaturationToken, KvCacheThreshold: 0.7, QueueLengthThreshold: 6,
		KvSpareTrigger: 0.2, QueueSpareTrigger: 4, ScaleUpThreshold: 0.9, ScaleDownBoundary: 0.6, ScaleDownStabilizationCycles: 7,
		BacklogDrainSeconds: 120, EnableLimiter: true, Priority: 2}, r.Scaling)
	assert.Equal(t, params.SLO{TargetTTFTms: 1500, TargetITLms: 40, Attainment: 0.95, StartupDelay: params.Duration(3 * time.Minute)}, r.SLO)
	assert.Equal(t, params.ScaleToZero{Enabled: true, RetentionPeriod: params.Duration(20 * time.Minute)}, r.ScaleToZero)
	assert.Equal(t, &params.QueueingModel{SLOMultiplier: 4, TuningEnabled: false, TargetTTFTms: 800, TargetITLms: 30}, r.QueueingModel)
}

// Validate applies the entries' checks to a configuration built elsewhere.
func TestValidateResolved(t *testing.T) {
	require.NoError(t, Validate(params.Defaults()))
	r := params.Defaults()
	r.SLO.Attainment = 1
	assert.ErrorContains(t, Validate(r), "sloAttainment=1: must be in [0.5, 0.9999]")
	r = params.Defaults()
	r.Scaling.KvSpareTrigger = 0.9
	assert.ErrorContains(t, Validate(r), "kvSpareTrigger=0.9")
	r = params.Defaults()
	r.ScaleToZero.RetentionPeriod = params.Duration(time.Second)
	assert.ErrorContains(t, Validate(r), "retention_period=1s")
	r = params.Defaults()
	r.QueueingModel = &params.QueueingModel{SLOMultiplier: 1}
	assert.ErrorContains(t, Validate(r), "sloMultiplier=1")
}
