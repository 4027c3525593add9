package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// At concurrency 1 the engine serves one request at a time, so the figures
// follow from the step formula: the prompt is one prefill step (it fits the
// token budget), then each output token one decode step whose attention
// reads the context so far.
func TestBenchReplicaOneClientFollowsTheStepFormula(t *testing.T) {
	spec := ServerSpec{Alpha: 20, Beta: 0.05, Gamma: 0.001, NumGPUBlocks: 4096, BlockSize: 16, MaxNumSeqs: 64, MaxNumBatchedTokens: 8192}
	const in, out = 1000, 101
	p, err := BenchReplica(spec, in, out, 1)
	require.NoError(t, err)

	prefill := spec.Alpha + spec.Beta*in + spec.Gamma*in
	// Decode token k (k = 2..out) attends to in + k - 1 tokens.
	var decode float64
	for k := 2; k <= out; k++ {
		decode += spec.Alpha + spec.Beta + spec.Gamma*float64(in+k-1)
	}
	itl := decode / (out - 1)
	assert.InDelta(t, prefill, p.TTFTMs, 0.01)
	assert.InDelta(t, itl, p.ITLMs, 0.01)
	assert.InDelta(t, out/((prefill+decode)/1000), p.OutputTokensPerSecond, 0.01)
}

// More clients share each step: throughput rises while each request's
// inter-token latency grows, until the batch limit holds the rest waiting
// and TTFT climbs.
func TestBenchReplicaConcurrencyTradesLatencyForThroughput(t *testing.T) {
	spec := ServerSpec{Alpha: 20, Beta: 0.05, Gamma: 0.0001, NumGPUBlocks: 20000, BlockSize: 16, MaxNumSeqs: 16, MaxNumBatchedTokens: 4096}
	var prev ReplicaPoint
	for i, c := range []int{1, 4, 16, 64} {
		p, err := BenchReplica(spec, 500, 200, c)
		require.NoError(t, err)
		assert.Equal(t, c, p.Concurrency)
		if i > 0 {
			assert.GreaterOrEqual(t, p.ITLMs, prev.ITLMs, "concurrency %d", c)
			assert.GreaterOrEqual(t, p.OutputTokensPerSecond, prev.OutputTokensPerSecond*0.99, "concurrency %d", c)
		}
		prev = p
	}
	// At 64 clients and 16 sequences, 48 wait about three requests' time.
	at16, err := BenchReplica(spec, 500, 200, 16)
	require.NoError(t, err)
	assert.Greater(t, prev.TTFTMs, 2*200*at16.ITLMs)
}

func TestBenchReplicaRefusesWhatAReplicaCannotServe(t *testing.T) {
	spec := ServerSpec{Alpha: 20, Beta: 0.05, NumGPUBlocks: 100, BlockSize: 16}
	for _, tc := range []struct {
		name            string
		in, out         int32
		concurrency     int
		wantErrContains string
	}{
		{"larger than the KV cache", 1500, 200, 1, "exceeds the replica's KV cache (1600 tokens)"},
		{"no clients", 100, 10, 0, "concurrency 0"},
		{"too many clients", 100, 10, MaxBenchConcurrency + 1, "concurrency 4097"},
		{"no prompt", 0, 10, 1, "input tokens 0"},
		{"no output", 100, 0, 1, "output tokens 0"},
		{"huge output", 100, MaxBenchTokens + 1, 1, "output tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BenchReplica(spec, tc.in, tc.out, tc.concurrency)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErrContains)
		})
	}
}

func TestBenchScenarioNamesEachVariantsHardware(t *testing.T) {
	sc := DefaultScenario()
	sc.Variants[0].Hardware = "4 x L40S 48GB, FP8, TP4, vLLM"
	rep, err := BenchScenario(sc, "", 1000, 100, []int{1, 8})
	require.NoError(t, err)
	require.Len(t, rep.Variants, len(sc.Variants))
	assert.Equal(t, "4 x L40S 48GB, FP8, TP4, vLLM", rep.Variants[0].Hardware)
	assert.Equal(t, sc.Variants[1].Accelerator, rep.Variants[1].Hardware, "no description: the accelerator")
	for _, v := range rep.Variants {
		require.Len(t, v.Points, 2)
	}

	one, err := BenchScenario(sc, sc.Variants[1].Name, 1000, 100, []int{1})
	require.NoError(t, err)
	require.Len(t, one.Variants, 1)
	assert.Equal(t, rep.Variants[1].Points[0], one.Variants[0].Points[0])

	_, err = BenchScenario(sc, "no-such-variant", 1000, 100, []int{1})
	assert.ErrorContains(t, err, `no variant "no-such-variant"`)
}
