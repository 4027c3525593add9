package scenario

// ServerSpec is the vLLM-like model server of one variant. An engine step
// (one iteration of continuous batching) takes
//
//	Alpha + Beta * batchedTokens + Gamma * kvTokensOfTheBatch   milliseconds
//
// where batchedTokens are the prompt chunk and decode tokens computed in the
// step and kvTokensOfTheBatch the context the batch attends to. With an
// Overhead the step is a roofline instead:
//
//	Overhead + max(Alpha + Gamma * kvTokensOfTheBatch, Beta * batchedTokens)
//
// A step reads the weights and the batch's KV (memory-bound: Alpha, Gamma)
// or computes its tokens (compute-bound: Beta), whichever takes longer, and
// pays a fixed cost for launches and tensor-parallel communication on top.
// Summing the two instead charges a long prompt's chunk the weight reads
// its compute already hides (docs/simulator.md#the-server-model).
type ServerSpec struct {
	// Overhead (ms) makes the step a roofline; 0: the additive step.
	Overhead float64 `json:"overhead,omitempty"`
	Alpha    float64 `json:"alpha"`
	Beta     float64 `json:"beta"`
	Gamma    float64 `json:"gamma"`
	// KV cache: NumGPUBlocks blocks of BlockSize tokens (vllm:cache_config_info).
	NumGPUBlocks int32 `json:"numGPUBlocks"`
	BlockSize    int32 `json:"blockSize"`
	// --max-num-seqs and --max-num-batched-tokens (chunked prefill).
	MaxNumSeqs          int32 `json:"maxNumSeqs"`
	MaxNumBatchedTokens int32 `json:"maxNumBatchedTokens"`
}

// WithDefaults fills vLLM's defaults (block size 16, 256 sequences, 8192
// batched tokens).
func (s ServerSpec) WithDefaults() ServerSpec {
	if s.BlockSize == 0 {
		s.BlockSize = 16
	}
	if s.MaxNumSeqs == 0 {
		s.MaxNumSeqs = 256
	}
	if s.MaxNumBatchedTokens == 0 {
		s.MaxNumBatchedTokens = 8192
	}
	return s
}

// Validate names the first field outside its range (bounds.go).
func (s ServerSpec) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
		r    floatRange
	}{
		{"overhead", s.Overhead, overheadRange},
		{"alpha", s.Alpha, alphaRange},
		{"beta", s.Beta, betaRange},
		{"gamma", s.Gamma, gammaRange},
		{"numGPUBlocks", float64(s.NumGPUBlocks), numGPUBlocksRange},
		{"blockSize", float64(s.BlockSize), blockSizeRange},
		{"maxNumSeqs", float64(s.MaxNumSeqs), maxNumSeqsRange},
		{"maxNumBatchedTokens", float64(s.MaxNumBatchedTokens), batchedTokensRange},
	} {
		if err := f.r.check("server."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// StepMs is the duration of an engine step that computes batched tokens
// over a batch attending to kv tokens.
func (s ServerSpec) StepMs(batched, kv int64) float64 {
	if s.Overhead > 0 {
		return s.Overhead + max(s.Alpha+s.Gamma*float64(kv), s.Beta*float64(batched))
	}
	return s.Alpha + s.Beta*float64(batched) + s.Gamma*float64(kv)
}

// KVCapacityTokens is num_gpu_blocks * block_size.
func (s ServerSpec) KVCapacityTokens() int64 { return int64(s.NumGPUBlocks) * int64(s.BlockSize) }
