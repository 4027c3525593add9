package docs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// testNameRe matches a test a doc names as its evidence, in backticks.
	testNameRe = regexp.MustCompile("`(Test[A-Z]\\w*)`")
	// testFuncRe matches a test's definition.
	testFuncRe = regexp.MustCompile(`(?m)^func (Test\w*)\(`)
)

// unknownTests returns one message per test that a doc (docs, by path
// relative to root, as readDocs reads them) names and no _test.go file
// under root defines.
func unknownTests(root string, docs map[string]string) ([]string, error) {
	defined := map[string]bool{}
	never := func(string) bool { return false }
	isTest := func(path string) bool { return strings.HasSuffix(path, "_test.go") }
	err := eachFile(root, never, isTest, func(_, text string) error {
		for _, m := range testFuncRe.FindAllStringSubmatch(text, -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, rel := range slices.Sorted(maps.Keys(docs)) {
		for _, m := range testNameRe.FindAllStringSubmatch(docs[rel], -1) {
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
	root := repoRoot(t)
	problems, err := unknownTests(root, readDocs(t, root))
	reportProblems(t, problems, err)
}

func TestUnknownTestsCatchesARenamedOne(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) { writeFile(t, root, path, text) }
	write("pkg/a/a_test.go", "package a\n\nfunc TestKept(t *testing.T) {}\n")
	write("README.md", "Shown by `TestKept`.\n")
	write("docs/analyzers.md", "Shown by `TestKept` and `TestRenamed`; `Testing` is a word.\n")
	got, err := unknownTests(root, readDocs(t, root))
	require.NoError(t, err)
	assert.Equal(t, []string{"docs/analyzers.md names TestRenamed: no such test"}, got)
}
