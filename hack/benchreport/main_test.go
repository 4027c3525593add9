package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/calibrate"
	"github.com/wva-project/wva/pkg/sim/fleet"
)

func TestReplaceBlock(t *testing.T) {
	doc := "intro\n<!-- benchreport:t -->\nold\n<!-- /benchreport:t -->\nrest\n"
	got, err := replaceBlock(doc, "t", "new\n")
	require.NoError(t, err)
	assert.Equal(t, "intro\n<!-- benchreport:t -->\nnew\n<!-- /benchreport:t -->\nrest\n", got)

	_, err = replaceBlock(doc, "missing", "x")
	assert.ErrorContains(t, err, "benchreport:missing")
}

func TestTableOf(t *testing.T) {
	out := "Scenario: x\n\nPOLICY  COST\nwva  1.0\nstatic:1xa  2.0\n  oracle: note\n\nchart\n"
	assert.Equal(t, "POLICY  COST\nwva  1.0\nstatic:1xa  2.0\n  oracle: note\n", tableOf(out))
	assert.Equal(t, "POLICY  COST\nwva  1.0\n  oracle: note\n", withoutFrontier(tableOf(out)))
}

// The stamp's digest changes with every input and every table, and only
// with them.
func TestDigestOf(t *testing.T) {
	files := map[string][]byte{"go.sum": []byte("a v1\n"), "pkg/sim/fleet.go": []byte("package sim\n")}
	tables := []string{"README.md headline", "| wva | 50.8 |\n"}
	base := digestOf("go1.26.8 linux/amd64", files, tables)
	assert.Equal(t, base, digestOf("go1.26.8 linux/amd64", map[string][]byte{"pkg/sim/fleet.go": []byte("package sim\n"), "go.sum": []byte("a v1\n")}, tables), "map order")

	changed := map[string]string{
		"toolchain":   digestOf("go1.27.0 linux/amd64", files, tables),
		"a file":      digestOf("go1.26.8 linux/amd64", map[string][]byte{"go.sum": []byte("a v2\n"), "pkg/sim/fleet.go": []byte("package sim\n")}, tables),
		"a new file":  digestOf("go1.26.8 linux/amd64", map[string][]byte{"go.sum": []byte("a v1\n"), "pkg/sim/fleet.go": []byte("package sim\n"), "pkg/sim/x.go": nil}, tables),
		"a table":     digestOf("go1.26.8 linux/amd64", files, []string{"README.md headline", "| wva | 50.9 |\n"}),
		"bytes moved": digestOf("go1.26.8 linux/amd64", map[string][]byte{"go.sum": []byte("a v1\npackage sim\n"), "pkg/sim/fleet.go": nil}, tables),
	}
	for what, d := range changed {
		assert.NotEqual(t, base, d, what)
	}
}

func TestBlock(t *testing.T) {
	doc := "intro\n<!-- benchreport:t -->\nold\n<!-- /benchreport:t -->\nrest\n"
	got, err := block(doc, "t")
	require.NoError(t, err)
	assert.Equal(t, "old\n", got)
	_, err = block(doc, "missing")
	assert.ErrorContains(t, err, "benchreport:missing")
}

// The stamp covers the simulator, what it imports and the simulate
// command, not the programs it does not run.
func TestStampSources(t *testing.T) {
	require.NoError(t, os.Chdir("../.."))
	t.Cleanup(func() { _ = os.Chdir("hack/benchreport") })
	files, err := stampSources()
	require.NoError(t, err)
	for _, want := range []string{"go.sum", "pkg/sim/fleet/fleet.go", "pkg/sim/scenario/scenarios/default.yaml", "pkg/decide/pipeline.go",
		"pkg/analyzer/planner/planner.go", "pkg/collector/collector.go", "cmd/wva/app/simulate.go", "cmd/wva/app/root.go", "cmd/wva/main.go",
		"hack/benchreport/main.go", conv, servegenChat, nimTable} {
		assert.Contains(t, files, want)
	}
	for _, f := range files {
		assert.False(t, strings.HasPrefix(f, "pkg/engine/") || strings.HasPrefix(f, "pkg/adapter/") || f == "cmd/wva/app/adapter.go", f)
	}
}

func nim(in, out float64, c int, ttft, itl, tps float64) calibrate.Point {
	return calibrate.Point{Source: "nim#1", Concurrency: c, InputTokens: in, OutputTokens: out, TTFTMs: ttft, ITLMs: itl, OutputTokensPerSecond: tps}
}

const replicaHeader = "| in / out tokens | concurrency | simulated (TTFT ms / ITL ms / output tok/s) | NIM 1.8.0 (same) | worst error |\n| --- | --- | --- | --- | --- |\n"

func TestRenderReplicaTable(t *testing.T) {
	long, short := replicaShape{5000, 500}, replicaShape{500, 2000}
	for _, tc := range []struct {
		name      string
		published []calibrate.Point
		simulated map[replicaShape][]fleet.ReplicaPoint
		want      string
		err       string
	}{{
		name: "published order, worst of the three figures, either sign",
		published: []calibrate.Point{
			nim(5000, 500, 5, 546.7, 21.83, 218.48),
			nim(500, 2000, 1, 47.77, 18.91, 52.85),
			nim(5000, 500, 1, 406.77, 18.58, 51.67),
		},
		simulated: map[replicaShape][]fleet.ReplicaPoint{
			long: {
				{Concurrency: 1, TTFTMs: 453.84, ITLMs: 18.556, OutputTokensPerSecond: 51.54},
				{Concurrency: 5, TTFTMs: 454.2, ITLMs: 22.05, OutputTokensPerSecond: 218.2},
			},
			short: {{Concurrency: 1, TTFTMs: 47.8, ITLMs: 18.56, OutputTokensPerSecond: 53.8}},
		},
		want: replicaHeader +
			"| 5000 / 500 | 5 | 454.2 / 22.05 / 218.2 | 546.7 / 21.83 / 218.48 | 16.9% |\n" + // TTFT 454.2/546.7 - 1 = -16.9%
			"| 500 / 2000 | 1 | 47.8 / 18.56 / 53.8 | 47.77 / 18.91 / 52.85 | 1.9% |\n" + // ITL 18.56/18.91 - 1 = -1.85%
			"| 5000 / 500 | 1 | 453.8 / 18.56 / 51.5 | 406.77 / 18.58 / 51.67 | 11.6% |\n", // TTFT 453.84/406.77 - 1 = 11.57%
	}, {
		name:      "throughput the worst",
		published: []calibrate.Point{nim(100, 10, 50, 100, 10, 800)},
		simulated: map[replicaShape][]fleet.ReplicaPoint{{100, 10}: {{Concurrency: 50, TTFTMs: 101, ITLMs: 9.9, OutputTokensPerSecond: 1000}}},
		want:      replicaHeader + "| 100 / 10 | 50 | 101.0 / 9.90 / 1000.0 | 100 / 10 / 800 | 25.0% |\n",
	}, {
		name:      "no simulated point at the concurrency",
		published: []calibrate.Point{nim(5000, 500, 25, 688.69, 38.75, 623.4)},
		simulated: map[replicaShape][]fleet.ReplicaPoint{long: {{Concurrency: 5, TTFTMs: 1, ITLMs: 1, OutputTokensPerSecond: 1}}},
		err:       "no simulated point at 5000 input / 500 output tokens, concurrency 25",
	}, {
		name:      "no simulated point for the shape",
		published: []calibrate.Point{nim(500, 2000, 1, 47.77, 18.91, 52.85)},
		simulated: map[replicaShape][]fleet.ReplicaPoint{long: {{Concurrency: 1, TTFTMs: 1, ITLMs: 1, OutputTokensPerSecond: 1}}},
		err:       "no simulated point at 500 input / 2000 output tokens, concurrency 1",
	}, {
		name:      "a published zero",
		published: []calibrate.Point{nim(5000, 500, 1, 406.77, 0, 51.67)},
		simulated: map[replicaShape][]fleet.ReplicaPoint{long: {{Concurrency: 1, TTFTMs: 1, ITLMs: 1, OutputTokensPerSecond: 1}}},
		err:       "the error against it is undefined",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := renderReplicaTable(tc.published, tc.simulated)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReplicaShapes(t *testing.T) {
	order, concurrencies, err := replicaShapes([]calibrate.Point{
		nim(5000, 500, 1, 1, 1, 1), nim(500, 2000, 1, 1, 1, 1), nim(5000, 500, 50, 1, 1, 1), nim(5000, 500, 5, 1, 1, 1),
	})
	require.NoError(t, err)
	assert.Equal(t, []replicaShape{{5000, 500}, {500, 2000}}, order)
	assert.Equal(t, map[replicaShape][]int{{5000, 500}: {1, 50, 5}, {500, 2000}: {1}}, concurrencies)

	for name, p := range map[string]calibrate.Point{
		"rate-driven":      {Source: "nim#2", RequestRate: 2, InputTokens: 500, OutputTokens: 100},
		"fractional input": nim(500.5, 100, 1, 1, 1, 1),
		"no output":        nim(500, 0, 1, 1, 1, 1),
	} {
		_, _, err := replicaShapes([]calibrate.Point{p})
		assert.Error(t, err, name)
	}
}

// replicaTable runs `simulate replica` once per request shape of the
// published table, with the flags `simulate replica` takes (not the
// simulate command's --progress), and renders the published file's rows.
func TestReplicaTable(t *testing.T) {
	require.NoError(t, os.Chdir("../.."))
	t.Cleanup(func() { _ = os.Chdir("hack/benchreport") })
	var calls []string
	wva := func(args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		switch strings.Join(args, " ") {
		case "simulate replica --variant llama-70b-h100 --input-tokens 5000 --output-tokens 500 --concurrency 1,5,25,50 --json":
			return []byte(`{"variants":[{"name":"llama-70b-h100","hardware":"2 x H100","points":[
				{"concurrency":1,"ttftMs":400,"itlMs":18,"outputTokensPerSecond":50},{"concurrency":5,"ttftMs":500,"itlMs":22,"outputTokensPerSecond":220},
				{"concurrency":25,"ttftMs":700,"itlMs":39,"outputTokensPerSecond":620},{"concurrency":50,"ttftMs":800,"itlMs":60,"outputTokensPerSecond":800}]}]}`), nil
		case "simulate replica --variant llama-70b-h100 --input-tokens 500 --output-tokens 2000 --concurrency 1 --json":
			return []byte(`{"variants":[{"name":"llama-70b-h100","hardware":"2 x H100","points":[{"concurrency":1,"ttftMs":48,"itlMs":19,"outputTokensPerSecond":53}]}]}`), nil
		}
		return nil, errors.New("unexpected arguments")
	}
	got, err := replicaTable(wva)
	require.NoError(t, err, calls)
	assert.Len(t, calls, 2)
	rows := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, rows, 2+5)
	assert.Equal(t, "| 5000 / 500 | 1 | 400.0 / 18.00 / 50.0 | 406.77 / 18.58 / 51.67 | 3.2% |", rows[2])
	assert.Equal(t, "| 500 / 2000 | 1 | 48.0 / 19.00 / 53.0 | 47.77 / 18.91 / 52.85 | 0.5% |", rows[6])
}

// The committed docs hold every block's markers, so run and -check find them.
func TestReplicaBlockMarkers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/simulator.md")
	require.NoError(t, err)
	_, err = block(string(doc), "replica")
	assert.NoError(t, err)
}
