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

// testNameRe matches a test a doc names as its evidence, in backticks.
var testNameRe = regexp.MustCompile("`(Test[A-Z]\\w*)`")

// unknownTests returns one message per test that README.md or a page under
// docs/ names and no _test.go file under root defines.
func unknownTests(root string) ([]string, error) {
	defined := map[string]bool{}
	funcRe := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRe.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, page := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		b, err := os.ReadFile(page)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range testNameRe.FindAllStringSubmatch(string(b), -1) {
			if !defined[m[1]] {
				problems = append(problems, fmt.Sprintf("%s names %s: no such test", rel, m[1]))
			}
		}
	}
	return problems, nil
}

// TestDocsNameTestsThatExist: a test a doc cites as evidence exists, so
// renaming or merging a test breaks this test, not the reader's trail.
func TestDocsNameTestsThatExist(t *testing.T) {
	problems, err := unknownTests(repoRoot(t))
	reportProblems(t, problems, err)
}

func TestUnknownTestsCatchesARenamedOne(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) { writeFile(t, root, path, text) }
	write("pkg/a/a_test.go", "package a\n\nfunc TestKept(t *testing.T) {}\n")
	write("README.md", "Shown by `TestKept`.\n")
	write("docs/analyzers.md", "Shown by `TestKept` and `TestRenamed`; `Testing` is a word.\n")
	got, err := unknownTests(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"docs/analyzers.md names TestRenamed: no such test"}, got)
}
