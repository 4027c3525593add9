// Package flagdoc renders the flags of wva's cobra commands as Markdown
// tables and keeps the tables in the docs current: a table sits between
//
//	<!-- BEGIN GENERATED FLAGS: wva adapter -->
//	<!-- END GENERATED FLAGS -->
//
// and is rewritten from the command named in the first marker. A marker
// is a line of its own, so prose can quote one.
package flagdoc

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wva-project/wva/cmd/wva/app"
	"github.com/wva-project/wva/pkg/config"
)

const (
	beginPrefix = "<!-- BEGIN GENERATED FLAGS: "
	end         = "<!-- END GENERATED FLAGS -->"
)

var beginRE = regexp.MustCompile(`^<!-- BEGIN GENERATED FLAGS: (.+?) -->$`)

// Root is wva's command tree with the defaults a pod without
// POD_NAMESPACE gets: some defaults read it when the options are built,
// and the docs must not depend on the shell that generates them.
func Root() *cobra.Command {
	if v, ok := os.LookupEnv("POD_NAMESPACE"); ok {
		os.Unsetenv("POD_NAMESPACE")
		defer os.Setenv("POD_NAMESPACE", v)
	}
	return app.NewRootCommand()
}

// Layered reports whether the command reads its flags from WVA_*
// variables too (the commands with --config-file, see config.Load).
func Layered(cmd *cobra.Command) bool {
	return cmd.LocalFlags().Lookup(config.ConfigFileFlag) != nil
}

// Table is the Markdown table of cmd's own flags, sorted by name:
// flag | default | (environment variable) | description.
func Table(cmd *cobra.Command) string {
	var flags []*pflag.Flag
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !f.Hidden {
			flags = append(flags, f)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	env := Layered(cmd)
	var b strings.Builder
	if env {
		b.WriteString("| flag | default | environment | description |\n| --- | --- | --- | --- |\n")
	} else {
		b.WriteString("| flag | default | description |\n| --- | --- | --- |\n")
	}
	for _, f := range flags {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		fmt.Fprintf(&b, "| %s | %s |", name, defaultText(f))
		if env {
			fmt.Fprintf(&b, " `%s` |", config.EnvName(f.Name))
		}
		fmt.Fprintf(&b, " %s |\n", escape(f.Usage))
	}
	return b.String()
}

func defaultText(f *pflag.Flag) string {
	if req := f.Annotations[cobra.BashCompOneRequiredFlag]; len(req) > 0 && req[0] == "true" {
		return "(required)"
	}
	v := f.DefValue
	if _, ok := f.Value.(pflag.SliceValue); ok {
		v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	}
	if v == "" {
		return "-"
	}
	return "`" + v + "`"
}

// escape keeps help text one table cell of plain text: no column breaks,
// no HTML tags ("<start time in ns>") and no emphasis ("WVA_*").
func escape(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", `\<`, "*", `\*`).Replace(s)
}

// Commands lists the commands that have flags of their own, by path
// ("wva simulate replica"): each needs a generated table in the docs.
func Commands(root *cobra.Command) []string {
	var out []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasAvailableLocalFlags() && c != root {
			out = append(out, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	sort.Strings(out)
	return out
}

// find resolves a command path such as "wva simulate replica".
func find(root *cobra.Command, path string) (*cobra.Command, error) {
	words := strings.Fields(path)
	if len(words) == 0 || words[0] != root.Name() {
		return nil, fmt.Errorf("%q: want a command path starting with %q", path, root.Name())
	}
	c, rest, err := root.Find(words[1:])
	if err != nil || len(rest) > 0 || c.CommandPath() != strings.Join(words, " ") {
		return nil, fmt.Errorf("%q: no such command", path)
	}
	return c, nil
}

// Block is one generated table in a document.
type Block struct {
	Command string // "wva adapter"
	Old     string // the table as committed
	New     string // the table generated now
}

// Update rewrites every generated table of doc from root's commands.
func Update(doc string, root *cobra.Command) (string, []Block, error) {
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		m := beginRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if strings.TrimSpace(lines[i]) == end {
				return "", nil, fmt.Errorf("line %d: %s without a BEGIN marker", i+1, end)
			}
			continue
		}
		cmd, err := find(root, m[1])
		if err != nil {
			return "", nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != end; j++ {
			if strings.HasPrefix(strings.TrimSpace(lines[j]), beginPrefix) {
				return "", nil, fmt.Errorf("line %d: %s: nested BEGIN marker at line %d", i+1, m[1], j+1)
			}
		}
		if j == len(lines) {
			return "", nil, fmt.Errorf("line %d: %s: no %s", i+1, m[1], end)
		}
		b := Block{Command: m[1], Old: strings.Join(lines[i+1:j], ""), New: Table(cmd)}
		blocks = append(blocks, b)
		out.WriteString(b.New)
		out.WriteString(lines[j])
		i = j
	}
	return out.String(), blocks, nil
}

// Check reports every stale or missing table across docs (path -> text):
// a table that differs from the generated one, with a line diff naming the
// command, and a command with flags that no document has a table for.
func Check(docs map[string]string, root *cobra.Command) []string {
	var problems []string
	seen := map[string]bool{}
	paths := make([]string, 0, len(docs))
	for p := range docs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		_, blocks, err := Update(docs[p], root)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		for _, b := range blocks {
			seen[b.Command] = true
			if b.Old != b.New {
				problems = append(problems, fmt.Sprintf("%s: flags of %q are stale (make docs regenerates them):\n%s",
					p, b.Command, Diff(b.Old, b.New)))
			}
		}
	}
	for _, c := range Commands(root) {
		if !seen[c] {
			problems = append(problems, fmt.Sprintf("no document has a generated flag table of %q (%s%s -->)", c, beginPrefix, c))
		}
	}
	return problems
}

// Diff lists the lines only in old ("- ") and only in new ("+ "), in
// order (a longest common subsequence of lines).
func Diff(old, new string) string {
	a, b := strings.Split(strings.TrimSuffix(old, "\n"), "\n"), strings.Split(strings.TrimSuffix(new, "\n"), "\n")
	// lcs[i][j]: length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return out.String()
}
