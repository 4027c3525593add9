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

func TestSimulateCapacityJSON(t *testing.T) {
	out, err := run(t, "", "simulate", "capacity", "--input-tokens", "1000", "--output-tokens", "200", "--variant", "llama-70b-h100", "--rates", "2,20", "--json")
	require.NoError(t, err)
	var doc struct {
		SLO struct {
			Attainment float64 `json:"attainment"`
		} `json:"slo"`
		Requests int `json:"mixRequests"`
		Variants []struct {
			Name  string `json:"name"`
			AtSLO struct {
				RequestRate float64 `json:"requestRate"`
				SLOMet      float64 `json:"sloMet"`
			} `json:"atSLO"`
			Points []struct {
				RequestRate float64 `json:"requestRate"`
				SLOMet      float64 `json:"sloMet"`
				OverTTFT    float64 `json:"overTTFT"`
				TPOTP99Ms   float64 `json:"tpotP99Ms"`
			} `json:"points"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, 0.99, doc.SLO.Attainment)
	assert.Positive(t, doc.Requests)
	require.Len(t, doc.Variants, 1)
	v := doc.Variants[0]
	assert.Equal(t, "llama-70b-h100", v.Name)
	assert.GreaterOrEqual(t, v.AtSLO.SLOMet, 0.99)
	assert.Greater(t, v.AtSLO.RequestRate, 2.0)
	assert.Less(t, v.AtSLO.RequestRate, 20.0)
	require.Len(t, v.Points, 2)
	assert.Equal(t, 2.0, v.Points[0].RequestRate)
	assert.GreaterOrEqual(t, v.Points[0].SLOMet, 0.99, "a tenth of its capacity")
	assert.Positive(t, v.Points[0].TPOTP99Ms)
	assert.Greater(t, v.Points[1].OverTTFT, 0.5, "twice its capacity queues")
}

func TestSimulateCapacityTable(t *testing.T) {
	out, err := run(t, "", "simulate", "capacity", "--trace", "../../../examples/traces/azure-llm-inference-2023-conv.csv", "--duration", "10m")
	require.NoError(t, err)
	assert.Contains(t, out, "requests drawn from azure-llm-inference-2023-conv.csv")
	assert.Contains(t, out, "ITL <= 100ms for 99.0% of requests")
	for _, name := range []string{"llama-70b-l40s", "llama-70b-h100"} {
		assert.Regexp(t, name+`\s+[0-9.]+ \(at the SLO\)\s+99\.[0-9]+%`, out)
	}
}

func TestSimulateCapacityFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rate not a number", []string{"--rates", "1,x"}, `--rates "x"`},
		{"rate zero", []string{"--rates", "0"}, `--rates "0"`},
		{"unknown variant", []string{"--variant", "nope"}, `no variant "nope"`},
		{"a trace has its own lengths", []string{"--trace", "../../../examples/traces/azure-llm-inference-2023-conv.csv", "--input-tokens", "100"}, "a trace has its own"},
		{"missing trace", []string{"--trace", "no-such.csv"}, "no-such.csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, "", append([]string{"simulate", "capacity"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
