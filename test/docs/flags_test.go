package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/hack/flagdocs/flagdoc"
)

func readDocs(t *testing.T, root string) map[string]string {
	t.Helper()
	docs := map[string]string{}
	for _, f := range userDocs(t, root) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, f)
		docs[rel] = string(b)
	}
	return docs
}

// TestFlagTablesCurrent: the flag tables in the docs are the ones the
// commands generate (`make docs` rewrites them), and every command with
// flags has one.
func TestFlagTablesCurrent(t *testing.T) {
	for _, p := range flagdoc.Check(readDocs(t, repoRoot(t)), flagdoc.Root()) {
		t.Error(p)
	}
}

// TestFlagTablesCheckCatchesAMissingFlag: with one row of the committed
// adapter table removed, the check fails and names the command and flag.
func TestFlagTablesCheckCatchesAMissingFlag(t *testing.T) {
	docs := readDocs(t, repoRoot(t))
	const page = "docs/configuration.md"
	row := "| `--engine-interval` | `30s` | `WVA_ENGINE_INTERVAL` |"
	lines := strings.SplitAfter(docs[page], "\n")
	kept := lines[:0]
	removed := 0
	for _, l := range lines {
		if strings.HasPrefix(l, row) {
			removed++
			continue
		}
		kept = append(kept, l)
	}
	require.Equal(t, 1, removed, "the adapter table of %s has the row %s", page, row)
	docs[page] = strings.Join(kept, "")

	problems := flagdoc.Check(docs, flagdoc.Root())
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], `docs/configuration.md: flags of "wva adapter" are stale`)
	assert.Contains(t, problems[0], "+ "+row)
}
