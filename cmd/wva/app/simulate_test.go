package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSimulateJSON(t *testing.T) {
	out, err := run(t, "", "simulate", "--duration", "15m", "--shape", "spike", "--json", "--policies", "wva,wva-v1,oracle")
	require.NoError(t, err)
	var doc struct {
		Policies []struct {
			Policy        string  `json:"policy"`
			Cost          float64 `json:"cost"`
			CostToOracle  float64 `json:"costToOracle"`
			SLOAttainment float64 `json:"sloAttainment"`
			TTFTp99       float64 `json:"ttftP99Seconds"`
			ScaleEvents   int     `json:"scaleEvents"`
		} `json:"policies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Policies, 3)
	assert.Equal(t, "wva", doc.Policies[0].Policy)
	assert.Equal(t, "oracle", doc.Policies[2].Policy)
	for _, p := range doc.Policies {
		assert.Positive(t, p.Cost, p.Policy)
		assert.Positive(t, p.CostToOracle, p.Policy)
		assert.Positive(t, p.SLOAttainment, p.Policy)
	}
	assert.InDelta(t, 1, doc.Policies[2].CostToOracle, 1e-9)
}

func TestSimulateTableAndHTML(t *testing.T) {
	html := filepath.Join(t.TempDir(), "report.html")
	out, err := run(t, "", "simulate", "--duration", "10m", "--html", html, "--slo-ttft", "3s", "--slo-itl", "100ms",
		"--startup-delay", "2m", "--engine-interval", "15s", "--seed", "4")
	require.NoError(t, err)
	for _, want := range []string{"POLICY", "wva-v1", "queue-threshold", "static-peak", "oracle", "TTFT <= 3.00s and ITL <= 100ms", "start-up 2m0s", "HTML report: "} {
		assert.Contains(t, out, want)
	}
	data, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "<!DOCTYPE html>"))
	assert.Contains(t, string(data), "<svg")
}

func TestSimulateTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.csv")
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	for i := range 600 {
		b.WriteString(strings.Join([]string{ftoa(float64(i) * 0.5), "800", "150"}, ",") + "\n")
	}
	require.NoError(t, os.WriteFile(trace, []byte(b.String()), 0o600))
	out, err := run(t, "", "simulate", "--trace", trace, "--rate-scale", "2", "--time-scale", "0.5", "--policies", "wva,static-peak,oracle")
	require.NoError(t, err)
	assert.Contains(t, out, "t.csv (time x0.5, rate x2): 1200 requests")
}

func TestSimulateErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,abc,3\n"), 0o600))
	late := filepath.Join(t.TempDir(), "late.csv")
	require.NoError(t, os.WriteFile(late, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n9300000000,2,3\n"), 0o600))
	restated := filepath.Join(t.TempDir(), "wva-config.yaml")
	require.NoError(t, os.WriteFile(restated, []byte("wva-saturation-scaling-config:\n  default: |\n    targetTTFT: 2000\n"), 0o600))
	centuries := filepath.Join(t.TempDir(), "centuries.csv")
	require.NoError(t, os.WriteFile(centuries, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n4000000000,2,3\n"), 0o600))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", bad}, `line 3, column 2 (ContextTokens): "abc"`},
		{[]string{"--trace", late}, `line 3, column 1 (TIMESTAMP): "9300000000" is not a number of seconds in [0, 4102444800]`},
		{[]string{"--trace", centuries}, `line 3, column 1 (TIMESTAMP): the trace spans`},
		{[]string{"--policies", "wva,hpa"}, `unknown policy "hpa"`},
		{[]string{"--shape", "square"}, `traffic.synthetic.shape "square"`},
		{[]string{"--trace", bad, "--shape", "spike"}, "--trace and --shape"},
		{[]string{"--slo-ttft", "-1s"}, "--slo-ttft: slo.ttft: -1s is outside [1ms, 1h0m0s]"},
		{[]string{"--slo-itl", "100000h"}, "--slo-itl: slo.itl: 100000h0m0s is outside [1ms, 1h0m0s]"},
		// --slo-ttft moves wva's target with the yardstick: an entry
		// restating the old target is a second, conflicting SLO.
		{[]string{"--slo-ttft", "1s", "--wva-config", restated}, `targetTTFT 2000 conflicts with slo.ttft 1s`},
		{[]string{"--engine-interval", "1ns"}, "--engine-interval: control.engineInterval: 1ns is outside [1s, 1h0m0s]"},
		{[]string{"--warmup-mode", "backwards"}, `--warmup-mode: control.warmupMode: "backwards": want "replay" or "mirror"`},
		{[]string{"--startup-delay", "100000h"}, "--startup-delay: variants[0].startupDelay: 100000h0m0s is outside [0s, 24h0m0s]"},
		{[]string{"--base-rate", "1e9"}, "--base-rate: traffic.synthetic.baseRate: 1000000000 req/s is outside [0 req/s, 100000 req/s]"},
		{[]string{"--input-tokens", "0"}, "--input-tokens: traffic.synthetic.inputTokens: 0 is outside"},
		{[]string{"--trace", bad, "--output-tokens", "100"}, "--input-tokens and --output-tokens shape synthetic traffic"},
		{[]string{"--duration", "100000h"}, "--duration: traffic.synthetic.duration: 100000h0m0s is outside [1s, 744h0m0s]"},
		{[]string{"--time-scale", "1e-9"}, "--time-scale: traffic.timeScale: 1e-09 is outside [0.001, 1000]"},
		{[]string{"--rate-scale", "2000"}, "--rate-scale: traffic.rateScale: 2000 is outside (0, 1000]"},
		// The default's 1h at up to 27 req/s, copied 1000 times: refused
		// before the copies are allocated.
		{[]string{"--rate-scale", "1000"}, "rate scale 1000 makes"},
		{[]string{"--trace", bad, "--duration", "100000h"}, "--duration: traffic.limit: 100000h0m0s is outside [0s, 744h0m0s]"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "missing.csv")}, "no such file"},
		// Refused before the simulation runs (with wva-throughput alone,
		// the default hour would take a while).
		{[]string{"--explain", filepath.Join(t.TempDir(), "explain.txt"), "--policies", "wva-throughput"}, "--explain writes wva's decisions: add wva to --policies (wva-throughput)"},
	} {
		out, err := run(t, "", append([]string{"simulate"}, tt.args...)...)
		require.Error(t, err, tt.args)
		assert.Contains(t, err.Error(), tt.want)
		assert.Empty(t, out)
	}
}

func ftoa(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// --input-tokens and --output-tokens set the synthetic requests' mean lengths.
func TestSimulateSyntheticTokens(t *testing.T) {
	out, err := run(t, "", "simulate", "--duration", "5m", "--shape", "day", "--input-tokens", "3000", "--output-tokens", "50", "--policies", "oracle")
	require.NoError(t, err)
	m := regexp.MustCompile(`synthetic day: \d+ requests .* mean tokens in (\d+) / out (\d+)`).FindStringSubmatch(out)
	require.Len(t, m, 3, out)
	in, _ := strconv.Atoi(m[1])
	outTokens, _ := strconv.Atoi(m[2])
	assert.InDelta(t, 3000, in, 450)
	assert.InDelta(t, 50, outTokens, 8)
}
