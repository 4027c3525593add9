package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestDecideExample(t *testing.T) {
	out, err := run(t, "", "decide", "-f", "../../../examples/snapshots/scale-up.yaml", "-o", "json")
	require.NoError(t, err)
	var doc struct {
		Variants []struct {
			Name           string `json:"name"`
			TargetReplicas int32  `json:"targetReplicas"`
			Action         string `json:"action"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Variants, 2)
	assert.Equal(t, "v1-l4", doc.Variants[0].Name)
	assert.Equal(t, int32(3), doc.Variants[0].TargetReplicas)
	assert.Equal(t, "scale-up", doc.Variants[0].Action)
}

func TestDecideEmbeddedDefault(t *testing.T) {
	out, err := run(t, "", "decide")
	require.NoError(t, err)
	assert.Contains(t, out, "v1-l4    2        3       scale-up")
}

func TestDecideFromStdin(t *testing.T) {
	data, err := os.ReadFile("../../../examples/snapshots/scale-up.yaml")
	require.NoError(t, err)
	out, err := run(t, string(data), "decide", "-f", "-")
	require.NoError(t, err)
	assert.Contains(t, out, "v1-l4")
}

func TestDecideBadInputPrintsNothing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("modelID: m\nvariants:\n  - {name: v, minReplicas: 3, maxReplicas: 2, currentReplicas: 1, desiredReplicas: 0, replicas: []}\n"), 0o600))
	out, err := run(t, "", "decide", "-f", bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "variants[0].minReplicas: 3 is greater than maxReplicas 2")
	assert.Empty(t, out, "nothing half-printed")

	out, err = run(t, "", "decide", "-f", "../../../examples/snapshots/scale-up.yaml", "-o", "xml")
	require.Error(t, err)
	assert.Empty(t, out)

	_, err = run(t, "", "decide", "-f", "does-not-exist.yaml")
	assert.ErrorContains(t, err, "does-not-exist.yaml")
}

func TestVersion(t *testing.T) {
	out, err := run(t, "", "version")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "wva "), out)
}
