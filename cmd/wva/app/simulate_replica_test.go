package app

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSimulateReplicaJSON(t *testing.T) {
	out, err := run(t, "", "simulate", "replica", "--input-tokens", "5000", "--output-tokens", "500", "--concurrency", "1,5", "--json")
	require.NoError(t, err)
	var doc struct {
		Variants []struct {
			Name     string `json:"name"`
			Hardware string `json:"hardware"`
			Points   []struct {
				Concurrency           int     `json:"concurrency"`
				TTFTMs                float64 `json:"ttftMs"`
				ITLMs                 float64 `json:"itlMs"`
				OutputTokensPerSecond float64 `json:"outputTokensPerSecond"`
			} `json:"points"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.NotEmpty(t, doc.Variants)
	for _, v := range doc.Variants {
		assert.NotEmpty(t, v.Name)
		assert.NotEmpty(t, v.Hardware, v.Name)
		require.Len(t, v.Points, 2, v.Name)
		assert.Equal(t, []int{1, 5}, []int{v.Points[0].Concurrency, v.Points[1].Concurrency})
		for _, p := range v.Points {
			assert.Positive(t, p.TTFTMs, v.Name)
			assert.Positive(t, p.ITLMs, v.Name)
			assert.Positive(t, p.OutputTokensPerSecond, v.Name)
		}
		assert.Greater(t, v.Points[1].OutputTokensPerSecond, v.Points[0].OutputTokensPerSecond, v.Name)
	}
}

func TestSimulateReplicaFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"concurrency required", []string{"--input-tokens", "10", "--output-tokens", "10"}, `"concurrency" not set`},
		{"concurrency not a number", []string{"--input-tokens", "10", "--output-tokens", "10", "--concurrency", "1,x"}, `--concurrency "x"`},
		{"concurrency zero", []string{"--input-tokens", "10", "--output-tokens", "10", "--concurrency", "0"}, `--concurrency "0"`},
		{"unknown variant", []string{"--input-tokens", "10", "--output-tokens", "10", "--concurrency", "1", "--variant", "nope"}, `no variant "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, "", append([]string{"simulate", "replica"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSimulateReplicaTable(t *testing.T) {
	out, err := run(t, "", "simulate", "replica", "--input-tokens", "500", "--output-tokens", "100", "--concurrency", "1")
	require.NoError(t, err)
	for _, want := range []string{"TTFT ms", "ITL ms", "output tok/s", "500 input / 100 output tokens"} {
		assert.Contains(t, out, want)
	}
}
