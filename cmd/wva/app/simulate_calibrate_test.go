package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

const (
	nimTable          = "../../../examples/benchmarks/nim-1.8.0-llama-3.3-70b-2xh100-fp8-tp2.json"
	calibratedFleet   = "../../../pkg/sim/scenario/scenarios/default.yaml"
	calibratedVariant = "llama-70b-h100"
)

// NIM's published H100 table, fitted back within the default tolerance
// (15% per point): the roofline reproduces every point's ITL and
// throughput within 5% and its TTFT within 15%, and the fitted server is
// the one the calibrated scenario ships.
func TestSimulateCalibrateFitsNIMTable(t *testing.T) {
	out, err := run(t, "", "simulate", "calibrate", "--from", nimTable, "--scenario", calibratedFleet,
		"--variant", calibratedVariant, "--json")
	require.NoError(t, err)
	var rep struct {
		Server map[string]float64 `json:"server"`
		Points []struct {
			TTFTError       float64 `json:"ttftError"`
			ITLError        float64 `json:"itlError"`
			ThroughputError float64 `json:"throughputError"`
		} `json:"points"`
		Worst float64 `json:"worstError"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Points, 5)
	for i, p := range rep.Points {
		assert.Less(t, abs(p.ITLError), 0.05, "point %d ITL", i+1)
		assert.Less(t, abs(p.ThroughputError), 0.05, "point %d throughput", i+1)
		assert.Less(t, abs(p.TTFTError), 0.15, "point %d TTFT", i+1)
	}
	assert.Less(t, rep.Worst, 0.15)
	// The scenario's H100 is this fit (its comments give this command).
	assert.InEpsilon(t, 3.385, rep.Server["overhead"], 0.01)
	assert.InEpsilon(t, 15.1, rep.Server["alpha"], 0.01)
	assert.InEpsilon(t, 0.09258, rep.Server["beta"], 0.01)
	assert.Equal(t, 26474.0, rep.Server["numGPUBlocks"], "the variant's KV cache is kept")
}

func TestSimulateCalibrateRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	// Throughput that falls as concurrency rises while ITL stays flat: no
	// server model produces both.
	impossible := write("impossible.json", `{"time_to_first_token":{"unit":"ms","avg":400},"inter_token_latency":{"unit":"ms","avg":20},"output_token_throughput":{"unit":"tokens/sec","avg":900},"input_sequence_length":{"avg":1000},"output_sequence_length":{"avg":200},"input_config":{"concurrency":1}}
{"time_to_first_token":{"unit":"ms","avg":400},"inter_token_latency":{"unit":"ms","avg":20},"output_token_throughput":{"unit":"tokens/sec","avg":50},"input_sequence_length":{"avg":1000},"output_sequence_length":{"avg":200},"input_config":{"concurrency":20}}
`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"from required", nil, `"from" not set`},
		{"missing file", []string{"--from", filepath.Join(dir, "none.json")}, "no such file"},
		{"unknown variant", []string{"--from", nimTable, "--variant", "nope"}, `--variant "nope"`},
		{"bad tolerance", []string{"--from", nimTable, "--tolerance", "0"}, "--tolerance 0"},
		{"cannot fit", []string{"--from", impossible}, "the service model cannot reproduce this measurement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, "", append([]string{"simulate", "calibrate"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Runs driven by a request rate (vllm bench serve --request-rate) are
// fitted too: runs the calibrated H100 would measure at three rates, as
// --append-result writes them, give back its figures.
func TestSimulateCalibrateRateDrivenRuns(t *testing.T) {
	h100 := scenario.ServerSpec{Overhead: 3.385, Alpha: 15.1, Beta: 0.09258, Gamma: 8.062e-8, NumGPUBlocks: 26474, MaxNumBatchedTokens: 8192}
	var lines []string
	for _, rate := range []float64{0.2, 1, 2} {
		p, err := fleet.BenchReplicaRate(h100, 2000, 300, rate)
		require.NoError(t, err)
		run, err := json.Marshal(map[string]any{"completed": 100, "total_input_tokens": 200000, "total_output_tokens": 30000,
			"request_rate": rate, "max_concurrency": nil, "mean_ttft_ms": p.TTFTMs, "mean_tpot_ms": p.ITLMs,
			"mean_itl_ms": p.ITLMs, "output_throughput": p.OutputTokensPerSecond})
		require.NoError(t, err)
		lines = append(lines, string(run))
	}
	file := filepath.Join(t.TempDir(), "rates.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	out, err := run(t, "", "simulate", "calibrate", "--from", file, "--scenario", calibratedFleet, "--variant", calibratedVariant, "--json")
	require.NoError(t, err)
	var rep struct {
		Worst float64 `json:"worstError"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Less(t, rep.Worst, 0.05)
}
