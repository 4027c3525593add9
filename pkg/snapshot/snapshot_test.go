package snapshot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = `
modelID: meta/llama-70b
namespace: prod
variants:
  - name: v1-l4
    cost: 5
    minReplicas: 1
    maxReplicas: 10
    currentReplicas: 2
    desiredReplicas: 0
    replicas:
      - {pod: a, kvCacheUsage: 0.72, queueLength: 2}
      - {pod: b, kvCacheUsage: 0.70, queueLength: 1}
`

func TestParseRejectsBadInput(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(string) string
		wantErr []string
	}{
		{"missing model", func(s string) string { return strings.Replace(s, "modelID: meta/llama-70b", "", 1) }, []string{"modelID: required"}},
		{"missing variant name", func(s string) string { return strings.Replace(s, "name: v1-l4", "cost: 5", 1) }, nil},
		{"duplicate variant", func(s string) string {
			return s + "  - {name: v1-l4, currentReplicas: 0, desiredReplicas: 0, replicas: []}\n"
		}, []string{`variants[1].name: duplicate variant "v1-l4" (also variants[0])`}},
		{"usage above 1", func(s string) string { return strings.Replace(s, "0.72", "1.2", 1) }, []string{"variants[0].replicas[0].kvCacheUsage: 1.2 is outside [0, 1]"}},
		{"negative usage", func(s string) string { return strings.Replace(s, "0.72", "-0.1", 1) }, []string{"kvCacheUsage: -0.1 is outside [0, 1]"}},
		{"negative queue", func(s string) string { return strings.Replace(s, "queueLength: 2", "queueLength: -2", 1) }, []string{"variants[0].replicas[0].queueLength: -2 must be"}},
		{"NaN usage", func(s string) string { return strings.Replace(s, "0.72", ".nan", 1) }, []string{"kvCacheUsage"}},
		{"min above max", func(s string) string { return strings.Replace(s, "minReplicas: 1", "minReplicas: 11", 1) }, []string{"variants[0].minReplicas: 11 is greater than maxReplicas 10"}},
		{"negative cost", func(s string) string { return strings.Replace(s, "cost: 5", "cost: -5", 1) }, []string{"variants[0].cost: -5 must be"}},
		{"duplicate pod", func(s string) string { return strings.Replace(s, "pod: b", "pod: a", 1) }, []string{`duplicate pod "a"`}},
		{"unknown field", func(s string) string { return strings.Replace(s, "cost: 5", "costs: 5", 1) }, []string{`unknown field "costs"`}},
		{"bad metrics state", func(s string) string { return s + "metrics: maybe\n" }, []string{`metrics: "maybe" is not one of`}},
		{"bad config threshold", func(s string) string { return s + "config: {kvCacheThreshold: 2}\n" }, []string{"kvCacheThreshold=2: must be in (0, 1]"}},
		{"config typo", func(s string) string { return s + "config: {kvCacheThreshhold: 0.5}\n" }, []string{"unknown field"}},
		{"unknown analyzer", func(s string) string { return s + "analyzer: magic\n" }, []string{"analyzerName=magic"}},
		{"negative startup allowance", func(s string) string { return strings.Replace(s, "cost: 5", "cost: 5\n    startupAllowance: -1m", 1) },
			[]string{`variants[0].startupAllowance: -1m0s must be a duration >= 0`}},
		{"bad wake time", func(s string) string { return strings.Replace(s, "cost: 5", "cost: 5\n    scaledFromZeroAt: soon", 1) }, []string{"cannot parse snapshot"}},
		{"retention under a minute", func(s string) string { return s + "scaleToZero: {retention_period: 30s}\n" },
			[]string{"retention_period=30s: must be a duration of at least 1m0s"}},
		{"no variants", func(string) string { return "modelID: m\nvariants: []\n" }, []string{"variants: at least one variant is required"}},
		{"not yaml", func(string) string { return "modelID: [" }, []string{"cannot parse snapshot"}},
		{"second document", func(s string) string { return s + "---\nmodelID: other\n" }, []string{"a second YAML document starts at line 14: a snapshot is one document"}},
		{"custom tag", func(s string) string { return strings.Replace(s, "cost: 5", "cost: !dollars 5", 1) }, []string{"variants[0].cost: tag !dollars (line 6) is not accepted"}},
		{"custom tag on a mapping", func(s string) string { return s + "config: !cfg {kvSpareTrigger: 0.1}\n" }, []string{"config: tag !cfg"}},
		{"pods report while currentReplicas is 0", func(s string) string { return strings.Replace(s, "currentReplicas: 2", "currentReplicas: 0", 1) },
			[]string{"variants[0].replicas: 2 pods report metrics but currentReplicas is 0"}},
		{"pending above current", func(s string) string {
			return strings.Replace(s, "desiredReplicas: 0", "desiredReplicas: 0\n    pendingReplicas: 3", 1)
		},
			[]string{"variants[0].pendingReplicas: 3 is greater than currentReplicas 2"}},
		{"huge queue", func(s string) string { return strings.Replace(s, "queueLength: 2", "queueLength: 1e308", 1) },
			[]string{"variants[0].replicas[0].queueLength: 1e+308 must be a finite number in [0, 1e+06]"}},
		{"huge cost", func(s string) string { return strings.Replace(s, "cost: 5", "cost: 1e308", 1) },
			[]string{"variants[0].cost: 1e+308 must be a finite number in [0, 1e+06]"}},
		{"huge latency, rate and tokens", func(s string) string {
			return strings.Replace(s, "queueLength: 2}", "queueLength: 2, avgTTFTms: 1e308, avgITLms: 4e6, arrivalRate: 1e308, tokensInUse: 1e308, avgInputTokens: 2e9}", 1)
		}, []string{"replicas[0].avgTTFTms: 1e+308 must be a finite number in [0, 3.6e+06]", "replicas[0].avgITLms: 4e+06 must be",
			"replicas[0].arrivalRate: 1e+308 must be a finite number in [0, 1e+06]", "replicas[0].tokensInUse: 1e+308 must be a finite number in [0, 1e+09]",
			"replicas[0].avgInputTokens: 2e+09 must be"}},
		{"huge block counts", func(s string) string {
			return strings.Replace(s, "queueLength: 2}", "queueLength: 2, numGPUBlocks: 9000000000000000000, blockSize: 100000}", 1)
		}, []string{"replicas[0].numGPUBlocks: 9000000000000000000 must be in [0, 1000000000]", "replicas[0].blockSize: 100000 must be in [0, 65536]"}},
		{"huge replica counts", func(s string) string {
			return strings.Replace(s, "maxReplicas: 10", "maxReplicas: 2147483647\n    maxNumSeqs: 2000000\n    maxNumBatchedTokens: 9000000000000", 1)
		}, []string{"variants[0].maxReplicas: 2147483647 must be in [1, 10000]", "variants[0].maxNumSeqs: 2000000 must be in [0, 1000000]",
			"variants[0].maxNumBatchedTokens: 9000000000000 must be in [0, 1000000000]"}},
		{"huge scheduler queue and retention", func(s string) string {
			return s + "schedulerQueue: {size: 1e308, bytes: 1e308}\nrequestsInRetention: 1e308\n"
		}, []string{"schedulerQueue.size: 1e+308 must be", "schedulerQueue.bytes: 1e+308 must be", "requestsInRetention: 1e+308 must be"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.edit(base)))
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// Values at the stated limits still decide and render as JSON, and a
// trailing "---" is not a second document.
func TestParseAcceptsLimits(t *testing.T) {
	in := strings.Replace(base, "queueLength: 2}", "queueLength: 1e6, avgTTFTms: 3.6e6, avgITLms: 3.6e6, arrivalRate: 1e6, tokensInUse: 1e9, avgInputTokens: 1e9, avgOutputTokens: 1e9, numGPUBlocks: 1000000000, blockSize: 65536}", 1)
	in = strings.Replace(in, "cost: 5", "cost: 1e6", 1)
	in = strings.Replace(in, "maxReplicas: 10", "maxReplicas: 10000\n    pendingReplicas: 2", 1)
	for _, analyzer := range []string{"saturation-percentage", "saturation-token", "queueing-model", "slo-planner"} {
		t.Run(analyzer, func(t *testing.T) {
			s, err := Parse([]byte(in + "schedulerQueue: {size: 1e9, bytes: 1e15}\nrequestsInRetention: 1e12\nanalyzer: " + analyzer + "\n---\n"))
			require.NoError(t, err)
			out, err := Decide(s)
			require.NoError(t, err)
			_, err = Render(out, "json")
			require.NoError(t, err)
		})
	}
}

func TestDecideOutputShape(t *testing.T) {
	s, err := Parse([]byte(base + "analyzer: saturation-percentage\nconfig: {kvSpareTrigger: 0.15}\n"))
	require.NoError(t, err)
	out, err := Decide(s)
	require.NoError(t, err)
	text, err := Render(out, "json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(text, &doc))
	for _, key := range []string{"modelID", "namespace", "analysis", "variants"} {
		assert.Contains(t, doc, key)
	}
	analysis := doc["analysis"].(map[string]any)
	for _, key := range []string{"totalReplicas", "nonSaturated", "avgSpareKv", "avgSpareQueue", "shouldScaleUp", "scaleDownSafe", "inTransition"} {
		assert.Contains(t, analysis, key)
	}
	v := doc["variants"].([]any)[0].(map[string]any)
	for _, key := range []string{"name", "currentReplicas", "targetReplicas", "action", "reason"} {
		assert.Contains(t, v, key)
	}
	// avg spare KV (0.08+0.10)/2 = 0.09 < 0.15 -> one more replica.
	assert.Equal(t, "scale-up", v["action"])
	assert.Equal(t, 3.0, v["targetReplicas"])

	table, err := Render(out, "table")
	require.NoError(t, err)
	assert.Contains(t, string(table), "VARIANT")
	assert.Contains(t, string(table), "v1-l4")
	_, err = Render(out, "yaml")
	assert.ErrorContains(t, err, `output format "yaml"`)
}

// A snapshot that names no analyzer is decided by the built-in default, the
// slo-planner, as a cluster without a saturation ConfigMap entry is; the
// same snapshot naming saturation-percentage gets the percentage decision.
func TestDefaultAnalyzerIsThePlanner(t *testing.T) {
	// Two pods completing 9 req/s each: the planner holds 2 (20.1 req/s with
	// margin against 11.0 per replica), the percentage analyzer adds one
	// for KV.
	in := strings.NewReplacer("queueLength: 2}", "queueLength: 2, arrivalRate: 9}", "queueLength: 1}", "queueLength: 1, arrivalRate: 9}").Replace(base)
	cases := []struct {
		name, extra, analyzer, signalPrefix string
		replicas                            int32
	}{
		{"no analyzer", "", "slo-planner", "slo-planner: ", 2},
		{"empty analyzer", "analyzer: \"\"\n", "slo-planner", "slo-planner: ", 2},
		{"empty config.analyzerName", "config: {analyzerName: \"\"}\n", "slo-planner", "slo-planner: ", 2},
		// Avg spare KV (0.08+0.10)/2 = 0.09 < 0.10 -> one more replica.
		{"percentage by name", "analyzer: saturation-percentage\n", "saturation-percentage", "saturation: ", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(in + tc.extra))
			require.NoError(t, err)
			out, err := Decide(s)
			require.NoError(t, err)
			assert.Equal(t, tc.analyzer, out.Analyzer)
			require.Len(t, out.Variants, 1)
			require.NotNil(t, out.Signal)
			assert.True(t, strings.HasPrefix(out.Signal.Reason, tc.signalPrefix), out.Signal.Reason)
			v := out.Variants[0]
			assert.Equal(t, tc.replicas, v.TargetReplicas, v.Reason)
			assert.Contains(t, v.Reason, out.Signal.Reason, "the variant's reason carries the analyzer's")
		})
	}
}

func TestDefaultsMatchTheCRD(t *testing.T) {
	s, err := Parse([]byte("modelID: m\nvariants:\n  - {name: v, currentReplicas: 1, desiredReplicas: 0, replicas: [{pod: p, kvCacheUsage: 0.5, queueLength: 0}]}\n"))
	require.NoError(t, err)
	in, _, err := s.Input()
	require.NoError(t, err)
	v := in.Group.Variants[0]
	assert.Equal(t, int32(1), v.MinReplicas)
	assert.Equal(t, int32(2), v.MaxReplicas)
	assert.Equal(t, 10.0, v.Cost)
}

// Every shipped example snapshot parses and decides.
func TestExampleSnapshots(t *testing.T) {
	files, err := filepath.Glob("../../examples/snapshots/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			s, err := Parse(data)
			require.NoError(t, err)
			out, err := Decide(s)
			require.NoError(t, err)
			assert.Len(t, out.Variants, len(s.Variants))
		})
	}
}

// FuzzParse: any input either fails with an error or decides without panic,
// and every decided target lies within the variant's bounds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(`{"modelID":"m","variants":[{"name":"v","minReplicas":0,"maxReplicas":3,"currentReplicas":0,"desiredReplicas":0,"replicas":[]}],"metrics":"absent","scaleToZero":{"enable_scale_to_zero":true,"retention_period":"1m"}}`))
	f.Add([]byte("modelID: m\nvariants: [{name: v, currentReplicas: -1}]"))
	f.Add([]byte(base + "---\nmodelID: other\n"))
	f.Add([]byte(strings.Replace(base, "cost: 5", "cost: !dollars 5", 1)))
	f.Add([]byte(strings.Replace(base, "queueLength: 2", "queueLength: 1e308", 1)))
	// Renders +Inf unless queueLengthThreshold is bounded.
	f.Add([]byte(base + "config: {queueLengthThreshold: 1e308, queueSpareTrigger: 1e307}\n"))
	for _, name := range []string{"token-scale-up.yaml", "queueing-slo.yaml", "limited-gpu-budget.yaml", "slo-planner.yaml"} {
		if data, err := os.ReadFile(filepath.Join("../../examples/snapshots", name)); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		out, err := Decide(s)
		if err != nil {
			return
		}
		if _, err := Render(out, "json"); err != nil {
			t.Fatalf("an accepted snapshot does not render as JSON: %v", err)
		}
		bounds := map[string][2]int32{}
		for _, v := range s.Variants {
			lo, hi := v.bounds()
			bounds[v.Name] = [2]int32{lo, hi}
		}
		for _, v := range out.Variants {
			// The output lists variants by name, not in input order.
			lo, hi := bounds[v.Name][0], bounds[v.Name][1]
			if v.TargetReplicas < lo || v.TargetReplicas > hi {
				t.Fatalf("variant %s target %d outside [%d, %d]", v.Name, v.TargetReplicas, lo, hi)
			}
		}
	})
}
