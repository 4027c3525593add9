package flagdoc

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree is a small command tree: a layered daemon, a plain tool with a
// subcommand, and a command without flags.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "wva"}
	daemon := &cobra.Command{Use: "daemon", Run: func(*cobra.Command, []string) {}}
	daemon.Flags().String("config-file", "", "settings file")
	daemon.Flags().Duration("engine-interval", 0, "time between cycles | often")
	daemon.Flags().StringSlice("paths", []string{"/a", "/b"}, "paths <forwarded>, `*` each")
	tool := &cobra.Command{Use: "tool", Run: func(*cobra.Command, []string) {}}
	tool.Flags().StringP("output", "o", "table", "output format:\n  json or table")
	sub := &cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}}
	sub.Flags().Int("n", 0, "how many")
	_ = sub.MarkFlagRequired("n")
	tool.AddCommand(sub)
	root.AddCommand(daemon, tool, &cobra.Command{Use: "version", Run: func(*cobra.Command, []string) {}})
	return root
}

func TestTable(t *testing.T) {
	root := tree()
	tests := []struct {
		path string
		want string
	}{
		{"wva daemon", "| flag | default | environment | description |\n| --- | --- | --- | --- |\n" +
			"| `--config-file` | - | `WVA_CONFIG_FILE` | settings file |\n" +
			"| `--engine-interval` | `0s` | `WVA_ENGINE_INTERVAL` | time between cycles \\| often |\n" +
			"| `--paths` | `/a,/b` | `WVA_PATHS` | paths \\<forwarded>, `\\*` each |\n"},
		{"wva tool", "| flag | default | description |\n| --- | --- | --- |\n" +
			"| `-o`, `--output` | `table` | output format: json or table |\n"},
		{"wva tool sub", "| flag | default | description |\n| --- | --- | --- |\n" +
			"| `--n` | (required) | how many |\n"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			cmd, err := find(root, tt.path)
			require.NoError(t, err)
			assert.Equal(t, tt.want, Table(cmd))
		})
	}
}

func TestCommands(t *testing.T) {
	assert.Equal(t, []string{"wva daemon", "wva tool", "wva tool sub"}, Commands(tree()))
}

func block(cmd, body string) string {
	return "<!-- BEGIN GENERATED FLAGS: " + cmd + " -->\n" + body + "<!-- END GENERATED FLAGS -->\n"
}

func TestUpdate(t *testing.T) {
	root := tree()
	sub, _ := find(root, "wva tool sub")
	doc := "intro, quoting `<!-- END GENERATED FLAGS -->`\n" + block("wva tool sub", "old table\n") + "prose\n"
	got, blocks, err := Update(doc, root)
	require.NoError(t, err)
	assert.Equal(t, "intro, quoting `<!-- END GENERATED FLAGS -->`\n"+block("wva tool sub", Table(sub))+"prose\n", got)
	require.Len(t, blocks, 1)
	assert.Equal(t, Block{Command: "wva tool sub", Old: "old table\n", New: Table(sub)}, blocks[0])

	again, _, err := Update(got, root)
	require.NoError(t, err)
	assert.Equal(t, got, again, "a generated document is a fixed point")
}

func TestUpdateErrors(t *testing.T) {
	root := tree()
	tests := []struct {
		name, doc, want string
	}{
		{"unknown command", block("wva nope", ""), `"wva nope": no such command`},
		{"argument, not a command", block("wva tool extra", ""), `"wva tool extra": no such command`},
		{"other root", block("kubectl get", ""), `want a command path starting with "wva"`},
		{"no end", "<!-- BEGIN GENERATED FLAGS: wva tool -->\nrow\n", "wva tool: no <!-- END GENERATED FLAGS -->"},
		{"end without begin", "text\n<!-- END GENERATED FLAGS -->\n", "line 2: <!-- END GENERATED FLAGS --> without a BEGIN marker"},
		{"nested", "<!-- BEGIN GENERATED FLAGS: wva tool -->\n" + block("wva tool sub", ""), "nested BEGIN marker at line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Update(tt.doc, root)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// current is a document with every command's table up to date.
func current(t *testing.T, root *cobra.Command) string {
	t.Helper()
	var doc strings.Builder
	for _, c := range Commands(root) {
		doc.WriteString("## " + c + "\n\n" + block(c, "") + "\n")
	}
	text, _, err := Update(doc.String(), root)
	require.NoError(t, err)
	return text
}

func TestCheck(t *testing.T) {
	root := tree()
	sub, _ := find(root, "wva tool sub")
	fresh := current(t, root)
	require.Empty(t, Check(map[string]string{"docs/a.md": fresh}, root))

	row := "| `--engine-interval` | `0s` | `WVA_ENGINE_INTERVAL` | time between cycles \\| often |\n"
	require.Contains(t, fresh, row)
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"row removed", strings.Replace(fresh, row, "", 1),
			[]string{`docs/a.md: flags of "wva daemon" are stale`, "+ " + strings.TrimSuffix(row, "\n")}},
		{"default edited", strings.Replace(fresh, "`table`", "`json`", 1),
			[]string{`flags of "wva tool" are stale`, "- | `-o`, `--output` | `json` |", "+ | `-o`, `--output` | `table` |"}},
		{"flag that no longer exists", strings.Replace(fresh, row, row+"| `--gone` | - | `WVA_GONE` | removed |\n", 1),
			[]string{`flags of "wva daemon" are stale`, "- | `--gone` |"}},
		{"table missing", strings.Replace(fresh, block("wva tool sub", Table(sub)), "", 1),
			[]string{`no document has a generated flag table of "wva tool sub"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, fresh, tt.doc)
			problems := Check(map[string]string{"docs/a.md": tt.doc}, root)
			require.Len(t, problems, 1)
			for _, w := range tt.want {
				assert.Contains(t, problems[0], w)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	assert.Equal(t, "", Diff("a\nb\n", "a\nb\n"))
	assert.Equal(t, "- b\n+ x\n+ d\n", Diff("a\nb\nc\n", "a\nx\nc\nd\n"))
}

// TestRootIgnoresPodNamespace: defaults that read POD_NAMESPACE are
// generated as a pod without it sees them.
func TestRootIgnoresPodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "shell-ns")
	cmd, err := find(Root(), "wva adapter")
	require.NoError(t, err)
	assert.Equal(t, "wva-system", cmd.Flags().Lookup("config-namespace").DefValue)
	assert.Equal(t, "shell-ns", mustEnv(t, "POD_NAMESPACE"), "restored")
}

func mustEnv(t *testing.T, name string) string {
	t.Helper()
	v, ok := os.LookupEnv(name)
	require.True(t, ok)
	return v
}
