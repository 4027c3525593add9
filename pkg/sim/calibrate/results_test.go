package calibrate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nimH100 is NVIDIA's published table for Llama-3.3-70B-Instruct, NIM
// 1.8.0 on 2 x H100 80GB, FP8, TP2, measured with AIPerf at fixed
// concurrency, 5000 input / 500 output tokens
// (docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance).
var nimH100 = []struct {
	concurrency          int
	ttftMs, itlMs, tokPS float64
}{
	{1, 406.77, 18.58, 51.67},
	{5, 546.7, 21.83, 218.48},
	{25, 688.69, 38.75, 623.4},
	{50, 834.51, 59.73, 814.37},
}

// vllmRun is the table's point as `vllm bench serve --save-result` writes
// it (trimmed: the per-request arrays are not needed).
func vllmRun(c int, ttft, itl, tokPS float64) map[string]any {
	completed := 10 * c
	return map[string]any{
		"backend": "vllm", "model_id": "meta-llama/Llama-3.3-70B-Instruct", "request_rate": "inf",
		"burstiness": 1.0, "max_concurrency": c, "duration": 120.5, "completed": completed,
		"total_input_tokens": 5000 * completed, "total_output_tokens": 500 * completed,
		"request_throughput": tokPS / 500, "output_throughput": tokPS,
		"mean_ttft_ms": ttft, "median_ttft_ms": ttft, "p99_ttft_ms": 2 * ttft,
		"mean_tpot_ms": itl, "median_tpot_ms": itl,
		// vLLM's ITL is the mean gap between any two tokens: not what the
		// other tools call ITL, and not what a Point holds.
		"mean_itl_ms": itl * 3,
		"input_lens":  []int{5000}, "output_lens": []int{500},
	}
}

// aiperfRun is the point as AIPerf's profile_export_aiperf.json has it.
func aiperfRun(c int, ttft, itl, tokPS float64, nested bool) map[string]any {
	metrics := map[string]any{
		"time_to_first_token":     map[string]any{"unit": "ms", "avg": ttft, "p99": 2 * ttft},
		"inter_token_latency":     map[string]any{"unit": "ms", "avg": itl},
		"output_token_throughput": map[string]any{"unit": "tokens/sec", "avg": tokPS},
		"input_sequence_length":   map[string]any{"unit": "tokens", "avg": 5000},
		"output_sequence_length":  map[string]any{"unit": "tokens", "avg": 500},
		"request_count":           map[string]any{"unit": "requests", "avg": 10 * c},
	}
	run := map[string]any{"input_config": map[string]any{"loadgen": map[string]any{"concurrency": c}}}
	if nested {
		run["records"] = metrics
	} else {
		for k, v := range metrics {
			run[k] = v
		}
	}
	return run
}

func encode(t *testing.T, runs ...map[string]any) []byte {
	t.Helper()
	var lines []string
	for _, r := range runs {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func TestParseReadsEachTool(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool string
		run  func(c int, ttft, itl, tokPS float64) map[string]any
	}{
		{"vllm.json", ToolVLLM, vllmRun},
		{"profile_export_aiperf.json", ToolAIPerf, func(c int, a, b, d float64) map[string]any { return aiperfRun(c, a, b, d, false) }},
		{"aiperf-records.json", ToolAIPerf, func(c int, a, b, d float64) map[string]any { return aiperfRun(c, a, b, d, true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []map[string]any
			for _, p := range nimH100 {
				runs = append(runs, tc.run(p.concurrency, p.ttftMs, p.itlMs, p.tokPS))
			}
			got, err := Parse(tc.name, encode(t, runs...))
			require.NoError(t, err)
			require.Len(t, got, len(nimH100))
			for i, p := range nimH100 {
				assert.Equal(t, Point{Source: tc.name + "#" + string(rune('1'+i)), Tool: tc.tool, Concurrency: p.concurrency,
					InputTokens: 5000, OutputTokens: 500, TTFTMs: p.ttftMs, ITLMs: p.itlMs, OutputTokensPerSecond: p.tokPS}, got[i])
			}
		})
	}
}

func TestParseRateDrivenAndUnits(t *testing.T) {
	run := vllmRun(1, 400, 20, 50)
	delete(run, "max_concurrency")
	run["request_rate"] = 2.5
	got, err := Parse("rate.json", encode(t, run))
	require.NoError(t, err)
	assert.Equal(t, 0, got[0].Concurrency)
	assert.InDelta(t, 2.5, got[0].RequestRate, 1e-12)

	a := aiperfRun(5, 0.5, 0.02, 200, false)
	a["time_to_first_token"] = map[string]any{"unit": "s", "avg": 0.5}
	a["inter_token_latency"] = map[string]any{"unit": "ns", "avg": 2e7}
	got, err = Parse("seconds.json", encode(t, a))
	require.NoError(t, err)
	assert.InDelta(t, 500, got[0].TTFTMs, 1e-9)
	assert.InDelta(t, 20, got[0].ITLMs, 1e-9)
}

func TestParseRefusesWhatCannotBeFitted(t *testing.T) {
	without := func(run map[string]any, key string) map[string]any { delete(run, key); return run }
	with := func(run map[string]any, key string, v any) map[string]any { run[key] = v; return run }
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", []byte(""), "no benchmark run"},
		{"not JSON", []byte("Successful requests: 10"), "not a JSON object"},
		{"unknown tool", encode(t, map[string]any{"foo": 1}), "neither a `vllm bench serve"},
		{"no TPOT", encode(t, without(vllmRun(5, 500, 20, 200), "mean_tpot_ms")), "mean_tpot_ms: missing"},
		{"nothing completed", encode(t, with(vllmRun(5, 500, 20, 200), "completed", 0)), "completed: 0"},
		{"TTFT not a number", encode(t, with(vllmRun(5, 500, 20, 200), "mean_ttft_ms", "fast")), "not a number"},
		{"no load", encode(t, without(with(vllmRun(5, 500, 20, 200), "request_rate", "inf"), "max_concurrency")), "load the run was measured at is unknown"},
		{"aiperf without config", encode(t, without(aiperfRun(5, 500, 20, 200, false), "input_config")), "load the run was measured at is unknown"},
		{"aiperf ITL missing", encode(t, without(aiperfRun(5, 500, 20, 200, false), "inter_token_latency")), "inter_token_latency: missing"},
		{"aiperf unknown unit", encode(t, with(aiperfRun(5, 500, 20, 200, false), "time_to_first_token", map[string]any{"unit": "fortnights", "avg": 1})), `unit "fortnights"`},
		{"zero throughput", encode(t, with(vllmRun(5, 500, 20, 200), "output_throughput", 0)), "must be positive"},
		{"second run bad", append(encode(t, vllmRun(1, 400, 20, 50)), encode(t, without(vllmRun(5, 500, 20, 200), "completed"))...), "#2: completed: missing"},
		{"too large", make([]byte, MaxResultBytes+1), "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("r.json", tc.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
