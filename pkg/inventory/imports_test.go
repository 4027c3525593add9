package inventory

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/wva-project/wva/"

// The inventory feeds the engine, which consumes it through its own
// ViewSource interface and decision's plain types: an import of the engine
// from here would point the arrow the wrong way (and cycle once the engine
// names the inventory).
func TestInventoryDoesNotImportEngine(t *testing.T) {
	assert.Empty(t, reaching(t, module+"pkg/inventory/...", module+"pkg/engine"))
}

// The check must be able to fail: the adapter wires the engine.
func TestReachingSeesAdapterEngine(t *testing.T) {
	got := reaching(t, module+"pkg/adapter", module+"pkg/engine")
	require.NotEmpty(t, got)
	assert.Contains(t, got, module+"pkg/adapter")
}

// reaching lists the packages among pattern and its (non-test)
// dependencies that import target directly.
func reaching(t *testing.T, pattern, target string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command lists the imports")
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pattern).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list: %s", ee.Stderr)
	}
	require.NoError(t, err)
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == target {
				found = append(found, f[0])
			}
		}
	}
	return found
}
