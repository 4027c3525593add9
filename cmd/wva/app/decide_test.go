package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestDecideExample(t *testing.T) {
	out, err := run(t, "", "decide", "-f", "../../../examples/snapshots/scale-up.yaml", "-o", "json")
	require.NoError(t, err)
	var doc struct {
		Variants []struct {
			Name           string `json:"name"`
			TargetReplicas int32  `json:"targetReplicas"`
			Action         string `json:"action"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Variants, 2)
	assert.Equal(t, "v1-l4", doc.Variants[0].Name)
	assert.Equal(t, int32(3), doc.Variants[0].TargetReplicas)
	assert.Equal(t, "scale-up", doc.Variants[0].Action)
}

func TestDecideEmbeddedDefault(t *testing.T) {
	out, err := run(t, "", "decide")
	require.NoError(t, err)
	assert.Contains(t, out, "v1-l4    2        3       scale-up")
}

func TestDecideFromStdin(t *testing.T) {
	data, err := os.ReadFile("../../../examples/snapshots/scale-up.yaml")
	require.NoError(t, err)
	out, err := run(t, string(data), "decide", "-f", "-")
	require.NoError(t, err)
	assert.Contains(t, out, "v1-l4")
}

func TestDecideBadInputPrintsNothing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("modelID: m\nvariants:\n  - {name: v, minReplicas: 3, maxReplicas: 2, currentReplicas: 1, desiredReplicas: 0, replicas: []}\n"), 0o600))
	out, err := run(t, "", "decide", "-f", bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "variants[0].minReplicas: 3 is greater than maxReplicas 2")
	assert.Empty(t, out, "nothing half-printed")

	out, err = run(t, "", "decide", "-f", "../../../examples/snapshots/scale-up.yaml", "-o", "xml")
	require.Error(t, err)
	assert.Empty(t, out)

	_, err = run(t, "", "decide", "-f", "does-not-exist.yaml")
	assert.ErrorContains(t, err, "does-not-exist.yaml")
}

func TestVersion(t *testing.T) {
	out, err := run(t, "", "version")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "wva "), out)
}

// Scale to zero under faults, offline: the shipped snapshots of a woken
// group, a gateway queue and a missing request counter all decide >= 1;
// the same inputs with evidence of idleness decide 0.
func TestDecideScaleToZeroUnderFaults(t *testing.T) {
	type variant struct {
		Name           string `json:"name"`
		TargetReplicas int32  `json:"targetReplicas"`
		Reason         string `json:"reason"`
	}
	decide := func(t *testing.T, stdin string, args ...string) variant {
		t.Helper()
		out, err := run(t, stdin, append([]string{"decide", "-o", "json"}, args...)...)
		require.NoError(t, err)
		var doc struct{ Variants []variant }
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		require.Len(t, doc.Variants, 1)
		return doc.Variants[0]
	}
	read := func(t *testing.T, name string) string {
		data, err := os.ReadFile("../../../examples/snapshots/" + name)
		require.NoError(t, err)
		return string(data)
	}
	cases := []struct {
		file   string
		edit   func(string) string // nil: the file as shipped
		want   int32
		reason string
	}{
		{file: "woken-from-zero.yaml", want: 1, reason: "granite-l4 scaled from zero 40s ago, within its wake grace of 11m0s"},
		{file: "woken-from-zero.yaml", edit: func(s string) string {
			// Woken 10 minutes ago with a 5m start-up allowance: past the
			// 6m grace, the retention rule applies again.
			s = strings.Replace(s, `scaledFromZeroAt: "2026-11-23T11:59:20Z"`, `scaledFromZeroAt: "2026-11-23T11:50:00Z"`, 1)
			return strings.Replace(s, "    replicas: []", "    startupAllowance: 5m\n    replicas: []", 1)
		}, want: 0, reason: "Fallback: scale-to-zero after retention period (no metrics for >10m); last metrics 15m0s ago"},
		{file: "gateway-queue.yaml", want: 1, reason: "not idle: 6 requests wait at the gateway"},
		{file: "gateway-queue.yaml", edit: func(s string) string {
			return strings.Replace(s, "schedulerQueue: {size: 6, bytes: 0}", "schedulerQueue: {size: 0, bytes: 0}", 1)
		}, want: 0, reason: "Scale-to-zero: no requests in retention period"},
		{file: "request-count-missing.yaml", want: 4, reason: "request-count series (vllm:request_success_total) is missing, a scraping fault"},
		{file: "request-count-missing.yaml", edit: func(s string) string {
			return strings.Replace(s, "scaleToZero:", "requestsInRetention: 0\nscaleToZero:", 1)
		}, want: 0, reason: "Scale-to-zero: no requests in retention period"},
		// Four saturated replicas with the counter at 0 (what a missing
		// series reads as when taken for zero) are not idle.
		{file: "request-count-missing.yaml", edit: func(s string) string {
			return strings.ReplaceAll(strings.Replace(s, "scaleToZero:", "requestsInRetention: 0\nscaleToZero:", 1),
				"kvCacheUsage: 0.0, queueLength: 0", "kvCacheUsage: 0.95, queueLength: 8")
		}, want: 5, reason: "not idle: pod llama-l4-a has 8 queued requests"},
	}
	for _, tc := range cases {
		name := tc.file
		if tc.edit != nil {
			name += " edited"
		}
		t.Run(name, func(t *testing.T) {
			var got variant
			if tc.edit == nil {
				got = decide(t, "", "-f", "../../../examples/snapshots/"+tc.file)
			} else {
				got = decide(t, tc.edit(read(t, tc.file)), "-f", "-")
			}
			assert.Equal(t, tc.want, got.TargetReplicas, got.Reason)
			assert.Contains(t, got.Reason, tc.reason)
		})
	}
}

// TestDecideEscapesAndCutsNames: names in a snapshot are the file's to
// choose; the table must not pass escape sequences or forged rows to the
// terminal, and errors must not echo a 10 MB name whole.
func TestDecideEscapesAndCutsNames(t *testing.T) {
	data, err := os.ReadFile("../../../examples/snapshots/scale-up.yaml")
	require.NoError(t, err)
	example := string(data)
	hostile := strconv.Quote("v1-l4\x1b]0;owned\x07\x1b[2J\nforged\t9\t9\tscale-up\tfake")
	tenMB := strings.Repeat("n", 10<<20)
	cases := []struct {
		name     string
		snapshot string
		output   []string // the table holds each
		errHas   []string // the error holds each
	}{
		{
			name:     "variant name with escapes and a forged row",
			snapshot: strings.Replace(example, "name: v1-l4", "name: "+hostile, 1),
			output:   []string{`"v1-l4\x1b]0;owned\a\x1b[2J\nforged\t9\t9\tscale-up\tfake"`},
		},
		{
			name:     "model and namespace with escapes",
			snapshot: strings.Replace(strings.Replace(example, "namespace: prod", `namespace: "p\x1b[31m"`, 1), "modelID: meta/llama-70b", `modelID: "m\r\n"`, 1),
			output:   []string{`model "m\r\n" (namespace "p\x1b[31m")`},
		},
		{
			name:     "10 MB variant name is cut in the table",
			snapshot: strings.Replace(example, "name: v1-l4", "name: "+tenMB, 1),
			output:   []string{strings.Repeat("n", 253) + "…"},
		},
		{
			name:     "10 MB duplicate variant name is cut in the error",
			snapshot: strings.Replace(strings.Replace(example, "name: v1-l4", "name: "+tenMB, 1), "name: v2-a100", "name: "+tenMB, 1),
			errHas:   []string{"variants[1].name: duplicate variant \"" + strings.Repeat("n", 253) + "\"… (also variants[0])"},
		},
		{
			name:     "duplicate pod with escapes is escaped in the error",
			snapshot: strings.Replace(strings.Replace(example, "pod: v1-l4-a", "pod: "+hostile, 1), "pod: v2-a100-a", "pod: "+hostile, 1),
			errHas:   []string{`duplicate pod "v1-l4\x1b]0;owned\a\x1b[2J\nforged\t9\t9\tscale-up\tfake"`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.snapshot, "decide", "-f", "-")
			for _, text := range []string{out, errText(err)} {
				assert.Less(t, len(text), 8<<10, "nothing echoed whole")
				assert.NotContains(t, text, "\x1b", "no escape sequence reaches the terminal")
				assert.NotContains(t, text, "\x07")
				assert.NotContains(t, text, "\r")
				assert.NotContains(t, text, "\nforged", "no forged row")
			}
			if tc.errHas != nil {
				require.Error(t, err)
				for _, s := range tc.errHas {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			for _, s := range tc.output {
				assert.Contains(t, out, s)
			}
			assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), strings.Count(tc.snapshot, "- name:")+3, "header, signal, column names and one row per variant:\n%s", out)
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
