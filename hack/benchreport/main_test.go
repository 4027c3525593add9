package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		"hack/benchreport/main.go", conv, servegenChat} {
		assert.Contains(t, files, want)
	}
	for _, f := range files {
		assert.False(t, strings.HasPrefix(f, "pkg/engine/") || strings.HasPrefix(f, "pkg/adapter/") || f == "cmd/wva/app/adapter.go", f)
	}
}
