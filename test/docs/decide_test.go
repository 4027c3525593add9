package docs

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/hack/flagdocs/flagdoc"
)

// decidePrompt opens a docs block that shows `wva decide`'s output: the
// rest of the block is what the command prints, with the arguments after
// wvaPrompt.
const (
	wvaPrompt    = "$ go run ./cmd/wva "
	decidePrompt = wvaPrompt + "decide"
)

// decideBlock is a fenced block of a page that opens with decidePrompt.
type decideBlock struct {
	page string
	line int
	args []string
	want string
}

// decideBlocks finds the blocks that open with decidePrompt, their lines
// taken out of the fence's indentation (a block inside a list item).
func decideBlocks(docs map[string]string) []decideBlock {
	var out []decideBlock
	pages := make([]string, 0, len(docs))
	for p := range docs {
		pages = append(pages, p)
	}
	sort.Strings(pages)
	for _, page := range pages {
		lines := strings.Split(docs[page], "\n")
		for i := 0; i < len(lines); i++ {
			// A fence opens with ``` (and maybe a language) and closes
			// with a bare ``` at any indentation.
			trimmed := strings.TrimLeft(lines[i], " ")
			if !strings.HasPrefix(trimmed, "```") {
				continue
			}
			indent := lines[i][:len(lines[i])-len(trimmed)]
			var body []string
			j := i + 1
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
				body = append(body, strings.TrimPrefix(lines[j], indent))
			}
			if len(body) > 0 && strings.HasPrefix(body[0], decidePrompt) {
				args := strings.Fields(strings.TrimPrefix(body[0], wvaPrompt))
				out = append(out, decideBlock{page: page, line: i + 2, args: args, want: strings.Join(body[1:], "\n") + "\n"})
			}
			i = j
		}
	}
	return out
}

// staleDecideBlocks runs each block's command and names the blocks whose
// output differs from what the command prints now.
func staleDecideBlocks(docs map[string]string, run func(args []string) (string, error)) []string {
	var problems []string
	for _, b := range decideBlocks(docs) {
		got, err := run(b.args)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s:%d: wva %s: %v", b.page, b.line, strings.Join(b.args, " "), err))
		case !matchesElided(b.want, got):
			problems = append(problems, fmt.Sprintf("%s:%d: the output of `wva %s` is stale; now:\n%s", b.page, b.line, strings.Join(b.args, " "), got))
		}
	}
	return problems
}

// matchesElided says whether got is want, where want may elide: a line
// "..." stands for any lines, and a line ending in "..." for any line
// that begins with the rest of it (the excerpts of long outputs).
func matchesElided(want, got string) bool {
	return matchLines(strings.Split(want, "\n"), strings.Split(got, "\n"))
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	if prefix, ok := strings.CutSuffix(want[0], "..."); ok {
		return strings.HasPrefix(got[0], prefix) && matchLines(want[1:], got[1:])
	}
	return want[0] == got[0] && matchLines(want[1:], got[1:])
}

// runWVA runs the wva command line in-process, from the repository root.
func runWVA(args []string) (string, error) {
	cmd := flagdoc.Root()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestDecideOutputsCurrent: every `wva decide` output quoted in the docs
// is what the command prints for that snapshot today.
func TestDecideOutputsCurrent(t *testing.T) {
	root := repoRoot(t)
	docs := readDocs(t, root)
	require.GreaterOrEqual(t, len(decideBlocks(docs)), 6, "the README's and analyzers.md's worked decisions")
	t.Chdir(root)
	for _, p := range staleDecideBlocks(docs, runWVA) {
		t.Error(p)
	}
}

// TestDecideOutputsCatchAStaleOne: with one target changed in the README's
// worked decision, the check names the README's block and prints what
// the command prints.
func TestDecideOutputsCatchAStaleOne(t *testing.T) {
	root := repoRoot(t)
	docs := readDocs(t, root)
	const current = "v1-l4    2        3       scale-up"
	require.Equal(t, 1, strings.Count(docs["README.md"], current))
	docs["README.md"] = strings.Replace(docs["README.md"], current, "v1-l4    2        4       scale-up", 1)
	t.Chdir(root)

	var stale []string
	for _, p := range staleDecideBlocks(docs, runWVA) {
		if strings.HasPrefix(p, "README.md:") {
			stale = append(stale, p)
		}
	}
	require.Len(t, stale, 1)
	assert.Contains(t, stale[0], "wva decide -f examples/snapshots/scale-up.yaml` is stale")
	assert.Contains(t, stale[0], current)
}

// TestDecideBlocksInListItems: a block indented inside a list item is
// read without its indentation, blocks without the prompt are not
// commands to check, and a fence with a language closes like any other.
func TestDecideBlocksInListItems(t *testing.T) {
	docs := map[string]string{"docs/a.md": strings.Join([]string{
		"- item:",
		"",
		"  ```",
		"  $ go run ./cmd/wva decide -f x.yaml",
		"  line one",
		"    indented",
		"  ```",
		"",
		"```",
		"go run ./cmd/wva decide -f y.yaml   # not a prompt",
		"```",
		"",
		"```yaml",
		"key: value",
		"```",
		"$ go run ./cmd/wva decide -f outside-any-block.yaml",
		"```",
		"```",
	}, "\n")}
	blocks := decideBlocks(docs)
	require.Len(t, blocks, 1)
	assert.Equal(t, decideBlock{page: "docs/a.md", line: 4, args: []string{"decide", "-f", "x.yaml"}, want: "line one\n  indented\n"}, blocks[0])
}

// TestMatchesElided: "..." lines stand for any lines, a trailing "..."
// for the rest of a line; everything else must match exactly.
func TestMatchesElided(t *testing.T) {
	const got = "model m\nsignal: s\nVARIANT  TARGET\nv1  3  scale-up: token-based: demand 1\n"
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{got, true},
		{"...\nVARIANT  TARGET\nv1  3  scale-up: token-based: ...\n", true},
		{"model m\n...\n", true},
		{"...\n", true},
		{"model m\nVARIANT  TARGET\n...\n", false},
		{"...\nv1  4  scale-up: ...\n", false},
		{"model m\nsignal: s\nVARIANT  TARGET\n", false},
	} {
		assert.Equal(t, tc.ok, matchesElided(tc.want, got), "%q", tc.want)
	}
}
