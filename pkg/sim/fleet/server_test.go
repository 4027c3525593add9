package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

var testSpec = scenario.ServerSpec{Alpha: 20, Beta: 0.07, Gamma: 0.0005, NumGPUBlocks: 12288, BlockSize: 16, MaxNumSeqs: 256, MaxNumBatchedTokens: 8192}

// oneReplica runs a fixed fleet of replicas of one variant on a steady
// Poisson trace and returns the summary.
func oneReplica(t *testing.T, spec scenario.ServerSpec, replicas int32, rate float64, d time.Duration, in, out float64) (Summary, *Fleet) {
	t.Helper()
	sc := scenario.Scenario{
		Name: "unit", ModelID: "m", Seed: 3,
		Variants: []scenario.VariantSpec{{Name: "v", Cost: 1, MinReplicas: replicas, MaxReplicas: replicas, InitialReplicas: replicas, Server: spec}},
		SLO:      scenario.SLO{TTFT: params.Duration(2 * time.Second), ITL: params.Duration(100 * time.Millisecond)},
		Traffic: scenario.Traffic{Synthetic: &scenario.Synthetic{Shape: scenario.ShapeSteady, Duration: params.Duration(d), BaseRate: rate,
			InputTokens: in, OutputTokens: out}},
	}
	sc.ApplyDefaults()
	require.NoError(t, sc.Validate())
	tr, err := sc.LoadTraffic()
	require.NoError(t, err)
	f := New(&sc, &tr, static{}, []int32{replicas})
	f.Run()
	return f.Summarize(), f
}

// Little's law: the time-average number of requests in the system (sampled
// at every scrape) equals the arrival rate times the mean time in system.
func TestServerLittlesLaw(t *testing.T) {
	for _, rate := range []float64{1, 2.5} {
		s, f := oneReplica(t, testSpec, 1, rate, time.Hour, 1000, 200)
		require.Zero(t, s.Unfinished)
		var inSystem float64
		for _, tp := range f.timeline[1:] {
			inSystem += float64(tp.Waiting + tp.Running)
		}
		L := inSystem / float64(len(f.timeline)-1)
		var sojourn float64
		for i, r := range f.results {
			sojourn += float64(r.ttft) + float64(r.itl)*float64(max(f.trace.Requests[i].Output, 1)-1)
		}
		lambda := float64(len(f.results)) / f.trace.Duration().Seconds()
		W := sojourn / float64(len(f.results))
		assert.InEpsilon(t, lambda*W, L, 0.08, "rate %.1f: L=%.2f, lambda*W=%.2f", rate, L, lambda*W)
	}
}

func TestServerTTFTGrowsWithLoad(t *testing.T) {
	var prevP50, prevP99 float64
	for _, rate := range []float64{0.5, 1.5, 2.5, 3.5} {
		s, _ := oneReplica(t, testSpec, 1, rate, 20*time.Minute, 1000, 200)
		assert.GreaterOrEqual(t, s.TTFTp50, prevP50, "rate %.1f", rate)
		assert.Greater(t, s.TTFTp99, prevP99, "rate %.1f", rate)
		prevP50, prevP99 = s.TTFTp50, s.TTFTp99
	}
}

func TestServerPreemptsWhenKVIsExhausted(t *testing.T) {
	small := testSpec
	small.NumGPUBlocks = 400 // 6,400 tokens: a handful of requests
	s, f := oneReplica(t, small, 1, 1, 10*time.Minute, 800, 400)
	assert.Positive(t, s.Preemptions)
	assert.Zero(t, s.Unfinished, "preempted requests are recomputed and finish")
	assert.Empty(t, f.pods[0].srv.running)
	assert.Equal(t, small.NumGPUBlocks, f.pods[0].srv.freeBlocks, "every block is returned")

	big := testSpec
	s, _ = oneReplica(t, big, 1, 1, 10*time.Minute, 800, 400)
	assert.Zero(t, s.Preemptions, "no preemption with room to spare")
}

func TestServerSchedule(t *testing.T) {
	spec := scenario.ServerSpec{Alpha: 10, Beta: 0.1, Gamma: 0.01, NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 512}
	s := newServer(spec)
	mk := func(id, in, out int32) *seq {
		return &seq{req: id, input: in, output: out, prompt: in, firstToken: -1}
	}
	a, b, c := mk(0, 700, 3), mk(1, 100, 2), mk(2, 10, 1)
	s.enqueue(a)
	s.enqueue(b)
	s.enqueue(c)

	// Step 1: a's first chunk takes the whole budget (chunked prefill).
	d, ok := s.schedule(0)
	require.True(t, ok)
	assert.Equal(t, int32(512), a.sched)
	assert.Equal(t, 2, s.numWaiting())
	ms := 10 + 0.1*512 + 0.01*512
	assert.InDelta(t, ms, float64(d)/float64(time.Millisecond), 1e-3)
	s.complete(d, nil)
	assert.Equal(t, int32(0), a.generated, "no token before the prompt is done")

	// Step 2: a's last 188 prompt tokens, then b is admitted (budget left);
	// c waits: max-num-seqs is 2.
	_, ok = s.schedule(0)
	require.True(t, ok)
	assert.Equal(t, int32(188), a.sched)
	assert.Equal(t, int32(100), b.sched)
	assert.Equal(t, 1, s.numWaiting())
	done := s.complete(2*time.Second, nil)
	assert.Empty(t, done)
	assert.Equal(t, 2*time.Second, a.firstToken)
	assert.Equal(t, int32(1), b.generated)

	// Step 3: both decode one token; b finishes (2 tokens).
	_, ok = s.schedule(0)
	require.True(t, ok)
	assert.Equal(t, int32(1), a.sched)
	assert.Equal(t, int32(1), b.sched)
	done = s.complete(3*time.Second, nil)
	require.Len(t, done, 1)
	assert.Equal(t, b, done[0])
	assert.Equal(t, int32(701), a.computed)
	assert.Equal(t, int32(44), a.blocks, "ceil(701/16)")
}

func TestServerPreemptionIsNewestFirst(t *testing.T) {
	// 3 blocks of 4 tokens; two requests fill them, the older one needs a
	// new block: the newer one is preempted back to the head of the queue.
	spec := scenario.ServerSpec{Alpha: 1, NumGPUBlocks: 3, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 100}
	s := newServer(spec)
	old := &seq{req: 0, input: 8, output: 5, prompt: 8, firstToken: -1}
	young := &seq{req: 1, input: 4, output: 5, prompt: 4, firstToken: -1}
	s.enqueue(old)
	s.enqueue(young)
	_, ok := s.schedule(0)
	require.True(t, ok)
	s.complete(time.Millisecond, nil)
	assert.Equal(t, int32(0), s.freeBlocks)
	// old has 8 tokens in 2 blocks and needs a third for its next token.
	_, ok = s.schedule(0)
	require.True(t, ok)
	assert.Equal(t, int64(1), s.preemptions)
	assert.Equal(t, int32(1), young.preempted)
	assert.Equal(t, int32(5), young.prompt, "recompute prompt + the token it generated")
	assert.Equal(t, []*seq{old}, s.running)
	assert.Equal(t, 1, s.numWaiting())
}

// With flow control, a request that only an absent variant can hold waits
// at the gateway without stalling those behind it (vLLM's router sends a
// request where it fits); a request no variant can hold is refused.
func TestGatewayDoesNotBlockBehindARequestOnlyAnotherVariantHolds(t *testing.T) {
	small := scenario.ServerSpec{Alpha: 20, Beta: 0.05, NumGPUBlocks: 1024, BlockSize: 16, MaxNumSeqs: 64, MaxNumBatchedTokens: 4096}
	large := small
	large.NumGPUBlocks = 16384
	sc := scenario.Scenario{
		Name: "unit", ModelID: "m", Seed: 1,
		Variants: []scenario.VariantSpec{
			{Name: "small", Cost: 1, MinReplicas: 2, MaxReplicas: 2, InitialReplicas: 2, Server: small},
			{Name: "large", Cost: 3, MinReplicas: 0, MaxReplicas: 1, Server: large},
		},
		SLO:     scenario.SLO{TTFT: params.Duration(2 * time.Second), ITL: params.Duration(100 * time.Millisecond)},
		Control: scenario.Control{FlowControl: true},
	}
	sc.ApplyDefaults()
	tr := trace.Trace{Requests: []trace.Request{
		{Arrival: 0, Input: 100_000, Output: 10},   // only "large" can hold it, and it has no replica
		{Arrival: 0, Input: 1_000_000, Output: 10}, // no variant can hold it
	}}
	for i := 1; i <= 50; i++ {
		tr.Requests = append(tr.Requests, trace.Request{Arrival: time.Duration(i) * time.Second, Input: 500, Output: 50})
	}
	f := New(&sc, &tr, static{}, []int32{2, 0})
	f.Run()
	s := f.Summarize()
	assert.Equal(t, 1, s.Rejected, "the request no variant can hold is refused")
	assert.Equal(t, 1, s.Unfinished, "the request only the absent variant holds still waits")
	assert.Equal(t, 50, int(float64(len(tr.Requests))*s.SLOAttainment+0.5), "every small request is served, within the SLO")
}

// static keeps the replicas it starts with.
type static struct{}

func (static) Start(*Fleet)                                {}
func (static) Engine(*Fleet)                               {}
func (static) HPA(*Fleet, int) *HPA                        { return nil }
func (static) Metric(*Fleet, int) (float64, float64, bool) { return 0, 0, false }
func (static) ScaleFromZero(*Fleet)                        {}

func TestFlowControl(t *testing.T) {
	spec := testSpec
	spec.NumGPUBlocks = 400
	run := func(fc bool) (Summary, int) {
		sc := scenario.Scenario{
			Name: "fc", ModelID: "m", Seed: 2,
			Variants: []scenario.VariantSpec{{Name: "v", Cost: 1, MinReplicas: 1, MaxReplicas: 1, InitialReplicas: 1, Server: spec}},
			SLO:      scenario.SLO{TTFT: params.Duration(2 * time.Second), ITL: params.Duration(100 * time.Millisecond)},
			Control:  scenario.Control{FlowControl: fc},
			Traffic: scenario.Traffic{Synthetic: &scenario.Synthetic{Shape: scenario.ShapeSteady, Duration: params.Duration(5 * time.Minute), BaseRate: 3,
				InputTokens: 800, OutputTokens: 300}},
		}
		sc.ApplyDefaults()
		tr, err := sc.LoadTraffic()
		require.NoError(t, err)
		f := New(&sc, &tr, static{}, []int32{1})
		maxWaiting, maxHeld := 0, 0
		f.SetProgress(func(time.Duration, time.Duration) {
			maxWaiting = max(maxWaiting, f.pods[0].srv.numWaiting())
			maxHeld = max(maxHeld, len(f.gateway))
		})
		f.Run()
		if fc {
			assert.LessOrEqual(t, maxWaiting, fcQueueDepth+2, "the server queue stays near the saturation threshold (preempted requests come back to it)")
			assert.Positive(t, maxHeld, "the rest waits at the gateway")
		} else {
			assert.Greater(t, maxWaiting, fcQueueDepth)
			assert.Zero(t, maxHeld)
		}
		return f.Summarize(), maxHeld
	}
	off, _ := run(false)
	on, _ := run(true)
	assert.Equal(t, off.Requests, on.Requests)
	assert.Zero(t, on.Unfinished)
}
