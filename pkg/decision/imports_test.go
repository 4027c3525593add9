package decision

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/wva-project/wva/"

// decisionPath is the pure decision layer: pure functions over plain
// values, testable and fuzzable without a cluster. pkg/snapshot is not in
// it: it parses its settings with pkg/config, as the adapter does.
var decisionPath = []string{
	module + "pkg/decision/...",
	module + "pkg/decide/...",
	module + "pkg/analyzer/...",
}

// forbidden are the import path prefixes the decision path must not reach:
// the cluster, and the ConfigMap parsing (the decision path takes
// pkg/decision/params).
var forbidden = []string{
	"k8s.io/client-go",
	"k8s.io/api",
	module + "pkg/config",
}

func TestDecisionPathImportsNoClient(t *testing.T) {
	for _, v := range forbiddenImports(t, decisionPath, forbidden) {
		t.Error(v)
	}
}

// The check must be able to fail: budget reads nodes through client-go.
func TestForbiddenImportsSeesBudget(t *testing.T) {
	got := forbiddenImports(t, []string{module + "pkg/budget"}, forbidden)
	require.NotEmpty(t, got)
	assert.Contains(t, strings.Join(got, "\n"), module+"pkg/budget -> k8s.io/client-go")
}

// ... and it sees pkg/config and k8s.io/api: the snapshot parses its
// settings with pkg/config, which reads ConfigMaps.
func TestForbiddenImportsSeesConfig(t *testing.T) {
	got := forbiddenImports(t, []string{module + "pkg/snapshot"}, forbidden)
	assert.Contains(t, strings.Join(got, "\n"), module+"pkg/snapshot -> "+module+"pkg/config")
	got = forbiddenImports(t, []string{module + "pkg/config"}, []string{"k8s.io/api"})
	assert.Contains(t, strings.Join(got, "\n"), module+"pkg/config -> k8s.io/api/core/v1")
}

// forbiddenImports lists, for each package matched by patterns, the import
// chains that reach a package under a forbidden prefix, as
// "root reaches bad: root -> ... -> bad". A chain stops at the first
// forbidden package.
func forbiddenImports(t *testing.T, patterns, prefixes []string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list imports")
	}
	// {{.DepOnly}} tells the listed packages from their dependencies.
	args := append([]string{"list", "-deps", "-f", "{{.DepOnly}} {{.ImportPath}} {{join .Imports \" \"}}"}, patterns...)
	var stderr bytes.Buffer
	cmd := exec.Command(goTool, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	imports := map[string][]string{}
	var roots []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 2, "go list line %q", line)
		imports[f[1]] = f[2:]
		if f[0] == "false" {
			roots = append(roots, f[1])
		}
	}
	require.NotEmpty(t, roots, "go list matched no package of %v", patterns)
	sort.Strings(roots)

	isForbidden := func(p string) bool {
		for _, prefix := range prefixes {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return true
			}
		}
		return false
	}
	var found []string
	for _, root := range roots {
		// Breadth first, so each chain is a shortest one.
		parent := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, dep := range imports[p] {
				if _, seen := parent[dep]; seen {
					continue
				}
				parent[dep] = p
				if isForbidden(dep) {
					chain := []string{dep}
					for q := p; q != ""; q = parent[q] {
						chain = append([]string{q}, chain...)
					}
					found = append(found, fmt.Sprintf("%s reaches %s: %s", root, dep, strings.Join(chain, " -> ")))
					continue
				}
				queue = append(queue, dep)
			}
		}
	}
	return found
}
