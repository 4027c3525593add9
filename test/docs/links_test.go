// Package docs checks the user documentation, README.md and docs/*.md: its
// links and the generated flag tables.
// It needs no external binaries, so it runs in every `make test`.
package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxReadmeLines keeps the README an overview; details live in docs/.
const maxReadmeLines = 200

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// userDocs lists README.md and docs/*.md.
func userDocs(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "docs/*.md")
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	assert.LessOrEqual(t, n, maxReadmeLines, "README.md has %d lines; move details to docs/", n)
}

func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	for _, f := range userDocs(t, root) {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			for _, p := range checkLinks(root, f) {
				t.Error(p)
			}
		})
	}
}

// TestCheckLinks shows the checker catches each kind of broken link.
func TestCheckLinks(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		full := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(text), 0o644))
	}
	write("docs/a.md", "# A page\n\n## `wva decide`: offline\n\n## Same\n\n## Same\n\n```\n## not a heading\n```\n")
	write("examples/x/README.md", "# x\n")
	write("data.csv", "a,b\n")
	tests := []struct {
		name, text string
		problems   []string // substrings, one per expected problem
	}{
		{"file", "[a](docs/a.md)", nil},
		{"directory", "[x](examples/x/)", nil},
		{"non-markdown file", "[d](data.csv)", nil},
		{"anchor", "[a](docs/a.md#wva-decide-offline)", nil},
		{"duplicate heading anchors", "[1](docs/a.md#same) [2](docs/a.md#same-1)", nil},
		{"own anchor", "# Top\n\n[t](#top)", nil},
		{"external and mail links are not checked", "[g](https://example.com/x) [m](mailto:a@b.c)", nil},
		{"links in code are not links", "```\n[no](missing.md)\n```\n`[no](missing.md)`", nil},
		{"missing file", "[m](docs/missing.md)", []string{`"docs/missing.md"`}},
		{"missing anchor", "[a](docs/a.md#nope)", []string{`no heading "#nope"`}},
		{"heading inside a code block", "[a](docs/a.md#not-a-heading)", []string{`no heading "#not-a-heading"`}},
		{"third duplicate", "[a](docs/a.md#same-2)", []string{`no heading "#same-2"`}},
		{"outside the repository", "[s](../shared/traces/x.csv)", []string{"outside the repository"}},
		{"absolute path", "[s](/etc/passwd)", []string{"absolute"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write("README.md", tt.text+"\n")
			got := checkLinks(root, filepath.Join(root, "README.md"))
			require.Len(t, got, len(tt.problems), "%q", got)
			for i, want := range tt.problems {
				assert.Contains(t, got[i], want)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, slug string }{
		{"Monitoring (Prometheus Operator)", "monitoring-prometheus-operator"},
		{"`wva decide`: a decision offline", "wva-decide-a-decision-offline"},
		{"Debugging with `kubectl get --raw`", "debugging-with-kubectl-get---raw"},
		{"KEDA: wva as an external scaler", "keda-wva-as-an-external-scaler"},
		{"Percentage-based saturation analyzer (default)", "percentage-based-saturation-analyzer-default"},
		{"Scale-from-zero latency", "scale-from-zero-latency"},
		{"[docs](x.md) and **bold**", "docs-and-bold"},
		{"backlog_drain_seconds", "backlog_drain_seconds"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.slug, slug(tt.heading), tt.heading)
	}
}

var (
	fenceRe      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
	linkRe       = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRe    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLinkRe     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// proseLines returns the lines outside fenced code blocks.
func proseLines(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRe.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			out = append(out, line)
		}
	}
	return out
}

// slug is GitHub's heading anchor: markup dropped, lower case, letters,
// digits, '-' and '_' kept, spaces turned into '-'.
func slug(heading string) string {
	h := mdLinkRe.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown file, with GitHub's
// -1, -2 suffixes for repeated headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkLinks returns one message per relative link in file that does not
// resolve to a file or directory inside root, or whose #anchor names no
// heading of the Markdown file it points to.
func checkLinks(root, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, line := range proseLines(string(b)) {
		line = inlineCodeRe.ReplaceAllString(line, "")
		for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
			target := m[1]
			u, err := url.Parse(target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("link %q: %v", target, err))
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // http(s), mailto: not checked offline
			}
			path, frag := u.Path, u.Fragment
			if strings.HasPrefix(path, "/") {
				problems = append(problems, fmt.Sprintf("link %q: absolute path; use a path relative to the file", target))
				continue
			}
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			}
			destAbs, err := filepath.Abs(dest)
			if err != nil {
				problems = append(problems, fmt.Sprintf("link %q: %v", target, err))
				continue
			}
			if r, err := filepath.Rel(rootAbs, destAbs); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				problems = append(problems, fmt.Sprintf("link %q: points outside the repository", target))
				continue
			}
			st, err := os.Stat(dest)
			if err != nil {
				problems = append(problems, fmt.Sprintf("link %q: no such file or directory", target))
				continue
			}
			if frag == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
				continue
			}
			text, err := os.ReadFile(dest)
			if err != nil {
				problems = append(problems, fmt.Sprintf("link %q: %v", target, err))
				continue
			}
			if !anchors(string(text))[frag] {
				problems = append(problems, fmt.Sprintf("link %q: no heading %q in %s", target, "#"+frag, filepath.Base(dest)))
			}
		}
	}
	return problems
}
