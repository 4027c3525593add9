package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// citeRe matches a code comment's citation of a docs section.
var citeRe = regexp.MustCompile(`docs/([\w.-]+\.md)#([\w-]+)`)

// citations returns one message per docs/<page>.md#<anchor> in the Go and
// YAML files under root (but test/docs) whose page or heading does not exist.
func citations(root string) ([]string, error) {
	var problems []string
	skipDir := func(path string) bool {
		// test/docs holds this check's own fixtures.
		return filepath.Base(path) == "testdata" || path == filepath.Join(root, "test", "docs")
	}
	keep := func(path string) bool { ext := filepath.Ext(path); return ext == ".go" || ext == ".yaml" }
	err := eachFile(root, skipDir, keep, func(path, text string) error {
		for _, m := range citeRe.FindAllStringSubmatch(text, -1) {
			rel, _ := filepath.Rel(root, path)
			page, err := os.ReadFile(filepath.Join(root, "docs", m[1]))
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s cites %s: no such page", rel, m[0]))
			case !anchors(string(page))[m[2]]:
				problems = append(problems, fmt.Sprintf("%s cites %s: no such heading", rel, m[0]))
			}
		}
		return nil
	})
	return problems, err
}

// eachFile calls visit with the path and text of each file under root that
// keep accepts, outside hidden directories and those skipDir names.
func eachFile(root string, skipDir, keep func(path string) bool, visit func(path, text string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || skipDir(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !keep(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return visit(path, string(b))
	})
}

// TestCodeCitationsResolve: a comment that cites docs/<page>.md#<section>
// names a heading that exists, so renaming a section breaks this test, not
// the reader's trail.
func TestCodeCitationsResolve(t *testing.T) {
	problems, err := citations(repoRoot(t))
	reportProblems(t, problems, err)
}

// reportProblems fails the test on a check's error and reports each
// problem it found.
func reportProblems(t *testing.T, problems []string, err error) {
	t.Helper()
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}

// writeFile writes text at path under root, making its directories.
func writeFile(t *testing.T, root, path, text string) {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte(text), 0o644))
}

func TestCitationsCatchBrokenOnes(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) { writeFile(t, root, path, text) }
	write("docs/design.md", "# Design\n\n## Queueing model\n")
	write("pkg/a/a.go", "// see docs/design.md#queueing-model\n// and docs/design.md#tuner-guards\npackage a\n")
	write("pkg/a/b.yaml", "# docs/missing.md#x\n")
	write("pkg/a/c.txt", "docs/design.md#not-checked\n")
	got, err := citations(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"pkg/a/a.go cites docs/design.md#tuner-guards: no such heading",
		"pkg/a/b.yaml cites docs/missing.md#x: no such page",
	}, got)
}
