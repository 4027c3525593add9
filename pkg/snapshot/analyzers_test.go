package snapshot

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decideFile(t *testing.T, path string) (Output, map[string]any, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := Parse(data)
	require.NoError(t, err)
	out, err := Decide(s)
	require.NoError(t, err)
	text, err := Render(out, "json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(text, &doc))
	table, err := Render(out, "table")
	require.NoError(t, err)
	return out, doc, string(table)
}

func targetsByName(doc map[string]any) map[string]float64 {
	out := map[string]float64{}
	for _, v := range doc["variants"].([]any) {
		m := v.(map[string]any)
		out[m["name"].(string)] = m["targetReplicas"].(float64)
	}
	return out
}

func TestTokenSnapshot(t *testing.T) {
	_, doc, table := decideFile(t, "../../examples/snapshots/token-scale-up.yaml")
	assert.Equal(t, "saturation-token", doc["analyzer"])
	a := doc["analysis"].(map[string]any)
	for _, key := range []string{"replicas", "variants", "total", "avgInputTokens", "schedulerQueueInputTokens"} {
		assert.Contains(t, a, key)
	}
	r := a["replicas"].([]any)[0].(map[string]any)
	for _, key := range []string{"k1", "k2", "k2Source", "capacity", "demand", "tokensInUse", "kvCapacityTokens"} {
		assert.Contains(t, r, key)
	}
	total := a["total"].(map[string]any)
	assert.Equal(t, 220000.0, total["demand"])
	assert.Equal(t, map[string]float64{"v1-l4": 2, "v2-h100": 4}, targetsByName(doc))
	sig := doc["signal"].(map[string]any)
	assert.Equal(t, map[string]any{"v1-l4": 12800.0, "v2-h100": 64000.0}, sig["capacityPerReplica"])
	assert.Contains(t, doc, "state")
	assert.Contains(t, table, "k1 12800, k2 281600 (derived)")
	assert.Contains(t, table, "required 169224")
}

// A snapshot's per-replica prefixCacheHitRate reaches the token analyzer:
// token-scale-up.yaml with half the prompt tokens cached queues 164,000
// tokens instead of 220,000 (pkg/analyzer/token
// TestPrefixCacheDiscountsQueuedDemand), and the H100 gets 2 more, not 3.
func TestTokenSnapshotPrefixCacheHitRate(t *testing.T) {
	data, err := os.ReadFile("../../examples/snapshots/token-scale-up.yaml")
	require.NoError(t, err)
	doc := strings.ReplaceAll(string(data), "avgOutputTokens: 200}", "avgOutputTokens: 200, prefixCacheHitRate: 0.5}")
	require.Equal(t, 3, strings.Count(doc, "prefixCacheHitRate: 0.5"))
	s, err := Parse([]byte(doc))
	require.NoError(t, err)
	out, err := Decide(s)
	require.NoError(t, err)
	text, err := Render(out, "json")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(text, &got))
	a := got["analysis"].(map[string]any)
	assert.Equal(t, 0.5, a["prefixCacheHitRate"])
	assert.InDelta(t, 164000.0, a["total"].(map[string]any)["demand"], 1e-6)
	assert.Equal(t, map[string]float64{"v1-l4": 2, "v2-h100": 3}, targetsByName(got))

	_, err = Parse([]byte(strings.Replace(doc, "prefixCacheHitRate: 0.5}", "prefixCacheHitRate: -0.1}", 1)))
	assert.ErrorContains(t, err, "prefixCacheHitRate: -0.1 is outside [0, 1]")
}

func TestQueueingSnapshot(t *testing.T) {
	_, doc, table := decideFile(t, "../../examples/snapshots/queueing-slo.yaml")
	assert.Equal(t, "queueing-model", doc["analyzer"])
	v := doc["analysis"].(map[string]any)["variants"].([]any)[0].(map[string]any)
	for _, key := range []string{"params", "paramsStdDev", "covariance", "tuning", "targetTTFTms", "targetITLms", "capacity", "ratePerReplica"} {
		assert.Contains(t, v, key)
	}
	assert.InDelta(t, 48.2, v["targetTTFTms"], 0.01) // the tuner moved the parameters slightly this cycle
	assert.InDelta(t, 4.914, v["ratePerReplica"], 0.01)
	assert.Equal(t, map[string]float64{"v1-h100": 3, "v2-a100": 0}, targetsByName(doc))
	state := doc["state"].(map[string]any)
	assert.Equal(t, "queueing-model", state["analyzer"])
	assert.Contains(t, table, "targets (inferred): TTFT 48.2 ms")

	// The printed state is a valid input state for the next cycle.
	data, err := os.ReadFile("../../examples/snapshots/queueing-slo.yaml")
	require.NoError(t, err)
	s, err := Parse(data)
	require.NoError(t, err)
	b, err := json.Marshal(state)
	require.NoError(t, err)
	s.State = b
	out, err := Decide(s)
	require.NoError(t, err)
	assert.Equal(t, "queueing-model", out.Analyzer)
}

func TestLimitedSnapshot(t *testing.T) {
	out, doc, table := decideFile(t, "../../examples/snapshots/limited-gpu-budget.yaml")
	assert.Equal(t, "greedy-by-score", out.Optimizer)
	assert.Equal(t, map[string]float64{"v1-l4": 6, "v2-h100": 3}, targetsByName(doc))
	for _, v := range out.Variants {
		assert.Equal(t, "gpu-limited", string(v.Rule), v.Reason)
	}
	assert.Contains(t, table, "GPU budget")
	assert.Contains(t, table, "v2-h100 +3 cut to +2")
}

func TestParseRejectsBadAnalyzerInputs(t *testing.T) {
	cases := []struct {
		name, add string
		want      string
	}{
		{"negative arrival", "", "arrivalRate: -1 must be"},
		{"hit rate above 1", "", "prefixCacheHitRate: 2 is outside [0, 1]"},
		{"bad role", "", `role: "both-ish" is not one of`},
		{"budget without limiter", "budget: {H100: 4}\n", "budget: applies only in limited mode"},
		{"negative budget", "config: {enableLimiter: true}\nbudget: {H100: -1}\n", "budget.H100: -1 must be in [0, 1000000]"},
		{"queueing config vs analyzer", "analyzer: saturation-token\nqueueingModel: {}\n", "queueingModel: selects the queueing-model analyzer"},
		{"bad sloMultiplier", "queueingModel: {sloMultiplier: 1}\n", "sloMultiplier=1"},
		{"bad state", "state: [1, 2]\n", "state: must be an object"},
		{"negative EPP queue", "schedulerQueue: {size: -1, bytes: 0}\n", "schedulerQueue.size: -1"},
		{"zero GPUs per replica", "", "gpusPerReplica: 0 must be in [1, 1024]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := base + tc.add
			switch tc.name {
			case "negative arrival":
				doc = strings.Replace(doc, "queueLength: 2}", "queueLength: 2, arrivalRate: -1}", 1)
			case "hit rate above 1":
				doc = strings.Replace(doc, "queueLength: 2}", "queueLength: 2, prefixCacheHitRate: 2}", 1)
			case "bad role":
				doc = strings.Replace(doc, "cost: 5", "cost: 5\n    role: both-ish", 1)
			case "zero GPUs per replica":
				doc = strings.Replace(doc, "cost: 5", "cost: 5\n    gpusPerReplica: 0", 1)
			}
			_, err := Parse([]byte(doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
