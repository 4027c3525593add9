package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/trace"
)

const servegenFixture = "../../../pkg/sim/servegen/testdata/pool"

// TestSimulateServegen: the written trace (plain or gzip) parses back to the
// generated requests, TIMESTAMP truncated to milliseconds.
func TestSimulateServegen(t *testing.T) {
	dir := t.TempDir()
	var texts []string
	for _, name := range []string{"t.csv", "t.csv.gz"} {
		path := filepath.Join(dir, name)
		cmd := NewRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs([]string{"simulate", "servegen", "--data", servegenFixture, "--from", "10m", "--to", "1h", "--mean-rate", "4", "-o", path})
		require.NoError(t, cmd.Execute(), errOut.String())
		assert.Empty(t, out.String())
		assert.Regexp(t, `^.*t\.csv(\.gz)?: \d+ requests over 50m0s, mean 4\.\d\d req/s, peak minute [\d.]+ req/s, mean tokens \d+ in / \d+ out\n$`, errOut.String())
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, strings.HasSuffix(name, ".gz"), bytes.HasPrefix(raw, []byte{0x1f, 0x8b}), name)
		f, err := os.Open(path)
		require.NoError(t, err)
		tr, err := trace.Parse(f, name)
		f.Close()
		require.NoError(t, err)
		assert.InDelta(t, 4*3000, len(tr.Requests), 4*3000*0.01)
		assert.Less(t, tr.Duration(), 50*time.Minute)
		for _, r := range tr.Requests {
			require.Zero(t, r.Arrival%time.Millisecond)
		}
		if !strings.HasSuffix(name, ".gz") {
			texts = append(texts, string(raw))
			assert.True(t, strings.HasPrefix(string(raw), "TIMESTAMP,ContextTokens,GeneratedTokens\n"))
		}
	}
	require.Len(t, texts, 1)
	assert.Regexp(t, `\n\d+\.\d{3},\d+,\d+\n`, texts[0])
}

func TestWriteTraceCSV(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeTraceCSV(&b, trace.Trace{Requests: []trace.Request{
		{Arrival: 0, Input: 1, Output: 2},
		{Arrival: 599999999999, Input: 30, Output: 4}, // 599.999999999 s stays in its window
		{Arrival: 3723*time.Second + 45*time.Millisecond, Input: 5, Output: 6},
	}}))
	assert.Equal(t, "TIMESTAMP,ContextTokens,GeneratedTokens\n0.000,1,2\n599.999,30,4\n3723.045,5,6\n", b.String())
}

func TestSimulateServegenFlags(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.csv")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"data required", []string{"--mean-rate", "1", "-o", out}, `"data" not set`},
		{"mean rate required", []string{"--data", servegenFixture, "-o", out}, `"mean-rate" not set`},
		{"output required", []string{"--data", servegenFixture, "--mean-rate", "1"}, `"output" not set`},
		{"missing directory", []string{"--data", filepath.Join(dir, "nope"), "--mean-rate", "1", "-o", out}, "no such file or directory"},
		{"span past the data", []string{"--data", servegenFixture, "--mean-rate", "1", "-o", out}, "span [0s, 12h0m0s): the data pool covers [0, 1h0m0s)"},
		{"negative rate", []string{"--data", servegenFixture, "--to", "1h", "--mean-rate", "-1", "-o", out}, "mean rate -1: must be a finite number > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, "", append([]string{"simulate", "servegen"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, statErr := os.Stat(out)
			assert.True(t, os.IsNotExist(statErr), "no file is left behind")
		})
	}
}
