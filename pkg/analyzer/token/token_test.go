package token

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decide/optimizer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func defaults() params.Resolved {
	cfg := params.Defaults()
	cfg.Scaling.AnalyzerName = Name
	return cfg // kvCacheThreshold 0.80, queueLengthThreshold 5, 0.85 / 0.70
}

func TestDerivedK2(t *testing.T) {
	cases := []struct {
		name     string
		b, s     int64
		in, out  float64
		expected float64
	}{
		// N = min(8192*200/1200, 256) = min(1365.3, 256) = 256; k2 = 256*(1000+100) = 281,600.
		{"vLLM defaults, seq-bound", 0, 0, 1000, 200, 281600},
		// N = min(2048*200/1200, 512) = 341.33; k2 = 341.33*1100 = 375,466.67.
		{"token-bound", 2048, 512, 1000, 200, 2048 * 200.0 / 1200 * 1100},
		// N = min(4096*1000/4000, 2048) = 1024; k2 = 1024*(3000+500) = 3,584,000.
		{"long outputs", 4096, 2048, 3000, 1000, 3584000},
		// N = min(8192*100/200, 256) = 256; k2 = 256*150 = 38,400.
		{"defaults, short", 0, 0, 100, 100, 38400},
		{"no output average: not derivable", 8192, 256, 1000, 0, 0},
	}
	for _, c := range cases {
		assert.InDelta(t, c.expected, DerivedK2(c.b, c.s, c.in, c.out), 1e-6, c.name)
	}
}

func TestUsefulCapacity(t *testing.T) {
	cases := []struct {
		name     string
		v        decision.Variant
		in, out  float64
		expected float64
	}{
		// The embedded simulator fleet on the conv trace's workload (I 1155,
		// O 211): N = min(2048*211/1366, 128) = 128; 128*(1155+105.5).
		{"L40S args", decision.Variant{MaxNumBatchedTokens: 2048, MaxNumSeqs: 128}, 1155, 211, 128 * 1260.5},
		// N = min(4096*211/1366, 256) = 256: twice the L40S, where its KV
		// cache is three times as large.
		{"H100 args", decision.Variant{MaxNumBatchedTokens: 4096, MaxNumSeqs: 256}, 1155, 211, 256 * 1260.5},
		// Only max-num-seqs set: the token budget is vLLM's default 8192.
		{"seqs only", decision.Variant{MaxNumSeqs: 64}, 1000, 200, 64 * 1100},
		{"no engine args: unknown, not vLLM's defaults", decision.Variant{}, 1000, 200, 0},
		{"no workload yet", decision.Variant{MaxNumSeqs: 64}, 0, 0, 0},
	}
	for _, c := range cases {
		assert.InDelta(t, c.expected, UsefulCapacity(c.v, c.in, c.out), 1e-6, c.name)
	}
}

// With engine args on every variant, the signal ranks by useful capacity:
// the H100 holds three times the L4's tokens (KV) but its args schedule
// only twice the L4's batch, so at three times the cost the L4 is cheaper
// per useful token and takes the scale-up, though the H100 is cheaper per
// KV token.
func TestUsefulCapacityRanksScaleUp(t *testing.T) {
	g := decision.Group{ModelID: "m",
		Variants: []decision.Variant{
			{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64},
			{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1, MaxNumBatchedTokens: 4096, MaxNumSeqs: 128},
		},
		Replicas: []decision.ReplicaMetrics{rep("l4-a", "l4", 0.9, 0, 1000), rep("h100-a", "h100", 0.9, 0, 3600)},
	}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.Greater(t, res.Signal.RequiredCapacity, 0.0)
	// Useful: l4 64*1100 = 70,400; h100 128*1100 = 140,800.
	assert.Equal(t, map[string]float64{"l4": 70400, "h100": 140800}, res.Signal.UsefulCapacityPerReplica)
	assert.Less(t, 15/res.Signal.CapacityOf("h100"), 5/res.Signal.CapacityOf("l4"), "H100 cheaper per KV token")
	got := targets(optimizer.OptimizeGroup(g, res.Signal))
	assert.Greater(t, got["l4"], int32(1))
	assert.Equal(t, int32(1), got["h100"])
}

func TestOutputBucket(t *testing.T) {
	for out, want := range map[float64]string{0: "short", 99.9: "short", 100: "medium", 499: "medium", 500: "long", 4000: "long"} {
		assert.Equal(t, want, OutputBucket(out), "%g", out)
	}
}

func TestSchedulerQueueDemand(t *testing.T) {
	cases := []struct {
		name                   string
		size, bytes, i, o, hit float64
		in, out                float64
	}{
		// in = max(20000/4, 10*1000) * (1-0.25) = 10000*0.75 = 7500; out = 10*200 = 2000.
		{"count dominates", 10, 20000, 1000, 200, 0.25, 7500, 2000},
		// in = max(80000/4, 10*1000) * 0.75 = 20000*0.75 = 15000.
		{"bytes dominate", 10, 80000, 1000, 200, 0.25, 15000, 2000},
		// Nothing known about the workload: bytes alone; in = 4000/4 = 1000.
		{"no averages", 5, 4000, 0, 0, 0, 1000, 0},
		{"empty queue", 0, 0, 1000, 200, 0, 0, 0},
	}
	for _, c := range cases {
		in, out := SchedulerQueueDemand(c.size, c.bytes, c.i, c.o, c.hit)
		assert.InDelta(t, c.in, in, 1e-9, c.name)
		assert.InDelta(t, c.out, out, 1e-9, c.name)
	}
}

func TestReplicaDemandAndSignals(t *testing.T) {
	demand := []struct {
		name string
		hit  float64
		role decision.Role
		want float64
	}{
		// 8000 in use + 3 queued * 1000 prompt tokens = 11,000 on a
		// prefill pod; + 3 * (1000 + 200) = 11,600 on a decode or
		// whole-request pod.
		{"prefill, no prefix hits", 0, decision.RolePrefill, 11000},
		{"decode, no prefix hits", 0, decision.RoleDecode, 11600},
		{"whole request, no prefix hits", 0, "", 11600},
		// 40% of prompt tokens cached: 8000 + 3 * 600 = 9,800; + 3 * 200
		// output = 10,400.
		{"prefill, 40% prefix hits", 0.4, decision.RolePrefill, 9800},
		{"whole request, 40% prefix hits", 0.4, "", 10400},
		// Every prompt token cached: only the output remains queued.
		{"whole request, all cached", 1, "", 8600},
		// A rate outside 0..1 is clamped, never inflating demand.
		{"negative rate is no discount", -0.5, decision.RolePrefill, 11000},
		{"rate above 1 is all cached", 1.5, decision.RolePrefill, 8000},
	}
	for _, c := range demand {
		assert.InDelta(t, c.want, ReplicaDemand(8000, 3, 1000, 200, c.hit, c.role), 1e-9, c.name)
	}

	cases := []struct {
		name                        string
		demand, supply, anticipated float64
		rc, sc                      float64
	}{
		// RC = 100000/0.85 - 89600 = 117647.06 - 89600 = 28047.06.
		{"scale-up", 100000, 89600, 89600, 100000/0.85 - 89600, 0},
		// Pending replicas count: 117647.06 - 153600 < 0 -> 0.
		{"pending covers it", 100000, 89600, 153600, 0, 0},
		// SC = 100000 - 50000/0.70 = 100000 - 71428.57 = 28571.43.
		{"scale-down", 50000, 100000, 100000, 0, 100000 - 50000/0.70},
		// 0.70 <= 60000/80000 = 0.75 <= 0.85: neither.
		{"in band", 60000, 80000, 80000, 0, 0},
		// Exactly at the threshold: 0.85*100000 / 0.85 - 100000 = 0 (float noise suppressed).
		{"exactly at threshold", 85000, 100000, 100000, 0, 0},
	}
	for _, c := range cases {
		rc, sc := Signals(c.demand, c.supply, c.anticipated, 0.85, 0.70)
		assert.InDelta(t, c.rc, rc, 1e-6, c.name)
		assert.InDelta(t, c.sc, sc, 1e-6, c.name)
	}
}

func TestBacklogWeight(t *testing.T) {
	cases := []struct {
		name              string
		drain, out, itlMs float64
		want              float64
	}{
		{"off", 0, 200, 50, 1},
		// T = 200*50/1000 = 10 s; 10/240.
		{"drained over 4 minutes", 240, 200, 50, 10.0 / 240},
		// T = 10 s > 5 s: the whole backlog.
		{"horizon shorter than a request", 5, 200, 50, 1},
		{"no ITL reported", 240, 200, 0, 1},
		{"no output average", 240, 0, 50, 1},
	}
	for _, c := range cases {
		assert.InDelta(t, c.want, BacklogWeight(c.drain, c.out, c.itlMs), 1e-12, c.name)
	}
}

// The backlog drained over 120 s. Two L4 (KV 16,000, capacity = derived
// k2 8*1,100 = 8,800 < k1 12,800), 8,000 tokens in use and 2 queued each,
// ITL 60 ms and 200 output tokens: a request holds its KV T = 12 s, weight
// 12/120 = 0.1. EPP queue 100 requests (1,000 in + 200 out).
func TestBacklogDrain(t *testing.T) {
	v := decision.Variant{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 30, CurrentReplicas: 2, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8}
	g := decision.Group{ModelID: "m", Variants: []decision.Variant{v}, SchedulerQueueSize: 100}
	for _, pod := range []string{"a", "b"} {
		r := rep(pod, "l4", 0.5, 2, 1000)
		r.AvgITLms = 60
		g.Replicas = append(g.Replicas, r)
	}
	cases := []struct {
		name          string
		drain         float64
		weight        float64
		demand, epp   float64
		required      float64
		replicasAfter int32
	}{
		// Off: D = 2*(8,000 + 2*1,200) + 100*1,200 = 20,800 + 120,000 = 140,800;
		// RC = 140,800/0.85 - 17,600 = 148,047.06 -> ceil(/8,800) = 17 more.
		{"whole backlog held", 0, 1, 140800, 120000, 140800/0.85 - 17600, 19},
		// D = 2*(8,000 + 0.1*2*1,200) + 0.1*120,000 = 16,480 + 12,000 = 28,480;
		// RC = 28,480/0.85 - 17,600 = 15,905.88 -> 2 more.
		{"drained over 120 s", 120, 0.1, 28480, 12000, 28480/0.85 - 17600, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Scaling.BacklogDrainSeconds = c.drain
			res, err := Analyzer{}.AnalyzeState(g, cfg, nil)
			require.NoError(t, err)
			a := res.Details.(Analysis)
			assert.InDelta(t, 12, a.RequestSeconds, 1e-9)
			assert.InDelta(t, c.weight, a.BacklogWeight, 1e-12)
			assert.InDelta(t, c.demand, a.Total.Demand, 1e-6)
			assert.InDelta(t, c.epp, a.Total.SchedulerQueueDemand, 1e-6)
			assert.InDelta(t, c.required, res.Signal.RequiredCapacity, 1e-6)
			assert.Equal(t, c.replicasAfter, targets(optimizer.OptimizeGroup(g, res.Signal))["l4"])
		})
	}
}

func rep(pod, variant string, usage, queue float64, blocks int64) decision.ReplicaMetrics {
	return decision.ReplicaMetrics{Pod: pod, Variant: variant, KvCacheUsage: usage, QueueLength: queue,
		NumGPUBlocks: blocks, BlockSize: 16, AvgInputTokens: 1000, AvgOutputTokens: 200}
}

// The k2 priority chain, replica by replica. KV = 1000*16 = 16,000 tokens,
// k1 = 0.8*16,000 = 12,800.
func TestK2Chain(t *testing.T) {
	v := decision.Variant{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8}
	cfg := defaults()

	// Queue 6 >= 5: observed. 0.6*16,000 = 9,600 in use -> k2 = 9,600.
	// Queue 0 on the other pod: the history now holds 9,600 -> historical.
	g := decision.Group{ModelID: "m", Variants: []decision.Variant{v}, Replicas: []decision.ReplicaMetrics{
		rep("a", "l4", 0.6, 6, 1000), rep("b", "l4", 0.3, 0, 1000)}}
	res, err := Analyzer{}.AnalyzeState(g, cfg, nil)
	require.NoError(t, err)
	a := res.Details.(Analysis)
	require.Len(t, a.Replicas, 2)
	assert.Equal(t, ReplicaCapacity{Pod: "a", Variant: "l4", KVCapacityTokens: 16000, TokensInUse: 9600, QueueLength: 6,
		K1: 12800, K2: 9600, K2Source: K2Observed, Capacity: 9600, Demand: 9600 + 6*1200}, a.Replicas[0])
	assert.Equal(t, K2Historical, a.Replicas[1].K2Source)
	assert.Equal(t, 9600.0, a.Replicas[1].Capacity)
	st := res.State.(State)
	assert.Equal(t, map[string][]float64{"L4|0|medium": {9600}}, st.History)

	// Another bucket (O = 50, short) has no history: derived from the args,
	// N = min(2048*50/1050, 8) = 8, k2 = 8*(1000+25) = 8,200 < k1.
	g.Replicas = []decision.ReplicaMetrics{rep("a", "l4", 0.3, 0, 1000)}
	g.Replicas[0].AvgOutputTokens = 50
	res, err = Analyzer{}.AnalyzeState(g, cfg, st)
	require.NoError(t, err)
	r := res.Details.(Analysis).Replicas[0]
	assert.Equal(t, K2Derived, r.K2Source)
	assert.Equal(t, 8200.0, r.K2)
	assert.Equal(t, 8200.0, r.Capacity)

	// No output average and no history: k1.
	g.Replicas[0].AvgOutputTokens, g.Replicas[0].AvgInputTokens = 0, 0
	res, err = Analyzer{}.AnalyzeState(g, cfg, nil)
	require.NoError(t, err)
	r = res.Details.(Analysis).Replicas[0]
	assert.Equal(t, K2Fallback, r.K2Source)
	assert.Equal(t, 12800.0, r.Capacity)

	// The window keeps the last 10 observations: 4,500..10,000 by 500
	// (all at least half of min(k1 12,800, derived 8,800) = 4,400) ->
	// 5,500..10,000, average 7,750.
	var prev any
	for i := 1; i <= 12; i++ {
		g.Replicas = []decision.ReplicaMetrics{rep("a", "l4", 0, 9, 1000)}
		g.Replicas[0].TokensInUse = float64(4000 + i*500)
		res, err = Analyzer{}.AnalyzeState(g, cfg, prev)
		require.NoError(t, err)
		prev = res.State
	}
	h := res.State.(State).History["L4|0|medium"]
	assert.Len(t, h, HistoryWindow)
	assert.Equal(t, 5500.0, h[0])
	g.Replicas = []decision.ReplicaMetrics{rep("a", "l4", 0.1, 0, 1000)}
	res, err = Analyzer{}.AnalyzeState(g, cfg, prev)
	require.NoError(t, err)
	assert.Equal(t, 7750.0, res.Details.(Analysis).Replicas[0].K2)
}

// A queue on a replica that holds little is a replica filling up, not an
// observation of k2. KV 16,000, k1 = 0.8*16,000 = 12,800; derived
// k2 = min(2048*200/1200, 8)*(1000+100) = 8*1,100 = 8,800; the floor is
// 0.5*min(12,800, 8,800) = 4,400 tokens.
func TestK2ObservationNeedsAFilledReplica(t *testing.T) {
	v := decision.Variant{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8}
	noArgs := v
	noArgs.MaxNumBatchedTokens, noArgs.MaxNumSeqs = 0, 0
	cases := []struct {
		name     string
		v        decision.Variant
		inUse    float64
		history  []float64
		k2       float64
		source   string
		recorded []float64
	}{
		// Just Ready, 592 tokens in use and 6 queued: derived, nothing recorded.
		{"fresh replica", v, 592, nil, 8800, K2Derived, nil},
		// The same with a history: the history's average, unchanged.
		{"fresh replica, history", v, 592, []float64{9000, 7000}, 8000, K2Historical, []float64{9000, 7000}},
		// At the floor: an observation.
		{"at the floor", v, 4400, nil, 4400, K2Observed, []float64{4400}},
		{"filled", v, 9600, nil, 9600, K2Observed, []float64{9600}},
		// No engine args: vLLM's defaults, derived = min(8192*200/1200, 256)*1,100
		// = 256*1,100 = 281,600 > k1, so the floor is 0.5*12,800 = 6,400.
		{"no args, below k1/2", noArgs, 6000, nil, 281600, K2Derived, nil},
		{"no args, above k1/2", noArgs, 6400, nil, 6400, K2Observed, []float64{6400}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rep("a", "l4", 0, 6, 1000)
			r.TokensInUse = c.inUse
			g := decision.Group{ModelID: "m", Variants: []decision.Variant{c.v}, Replicas: []decision.ReplicaMetrics{r}}
			var prev any
			if c.history != nil {
				prev = State{Analyzer: Name, History: map[string][]float64{"L4|0|medium": c.history}}
			}
			res, err := Analyzer{}.AnalyzeState(g, defaults(), prev)
			require.NoError(t, err)
			got := res.Details.(Analysis).Replicas[0]
			assert.Equal(t, c.source, got.K2Source)
			assert.InDelta(t, c.k2, got.K2, 1e-6)
			assert.Equal(t, c.recorded, res.State.(State).History["L4|0|medium"])
		})
	}
}

// examples/snapshots/token-scale-up.yaml, by hand:
// L4: KV 16,000, k1 12,800 (k2 derived 281,600 is larger) -> 12,800 per replica;
// demand per pod 12,800 + 4*1,200 = 17,600; H100: KV 80,000, k1 64,000;
// demand 60,000 + 4,800 = 64,800. EPP: 100*1,000 + 100*200 = 120,000.
// D = 2*17,600 + 64,800 + 120,000 = 220,000; supply = 2*12,800 + 64,000 = 89,600.
// RC = 220,000/0.85 - 89,600 = 169,223.53. Cost per token: H100 15/64,000 <
// L4 5/12,800, so H100 gets ceil(169,223.53/64,000) = 3 more.
func TestMultiReplicaScaleUp(t *testing.T) {
	g := decision.Group{ModelID: "m", SchedulerQueueSize: 100,
		Variants: []decision.Variant{
			{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
			{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 8, CurrentReplicas: 1},
		},
		Replicas: []decision.ReplicaMetrics{rep("l4-a", "l4", 0.8, 4, 1000), rep("l4-b", "l4", 0.8, 4, 1000), rep("h100-a", "h100", 0.75, 4, 5000)},
	}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	a := res.Details.(Analysis)
	assert.Equal(t, 120000.0, a.SchedulerQueueIn+a.SchedulerQueueOut)
	assert.Equal(t, 220000.0, a.Total.Demand)
	assert.Equal(t, 89600.0, a.Total.Supply)
	assert.InDelta(t, 220000/0.85-89600, res.Signal.RequiredCapacity, 1e-6)
	assert.Equal(t, map[string]float64{"l4": 12800, "h100": 64000}, res.Signal.CapacityPerReplica)
	assert.Equal(t, map[string]int32{"l4": 2, "h100": 4}, targets(optimizer.OptimizeGroup(g, res.Signal)))

	// A pending H100 replica is anticipated supply: RC = 258,823.53 -
	// (89,600 + 64,000) = 105,223.53; the H100 is skipped (pending), so the
	// L4 adds ceil(105,223.53/12,800) = 9 -> clamped to max 10.
	g.Variants[1].CurrentReplicas, g.Variants[1].PendingReplicas = 2, 1
	res, err = Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.InDelta(t, 220000/0.85-153600, res.Signal.RequiredCapacity, 1e-6)
	assert.Equal(t, map[string]int32{"l4": 10, "h100": 2}, targets(optimizer.OptimizeGroup(g, res.Signal)))
}

// The prefix cache hit rate discounts the prompt tokens of queued requests,
// in each pod's queue and in the EPP's. TestMultiReplicaScaleUp's group with
// half the prompt tokens cached: pod demand L4 12,800 + 4*(500+200) = 15,600,
// H100 60,000 + 2,800 = 62,800; EPP 100*1,000*0.5 + 100*200 = 70,000.
// D = 2*15,600 + 62,800 + 70,000 = 164,000; RC = 164,000/0.85 - 89,600 =
// 103,341.18 -> H100 gets ceil(/64,000) = 2 more (4 more without the cache).
func TestPrefixCacheDiscountsQueuedDemand(t *testing.T) {
	cases := []struct {
		name   string
		hit    float64
		demand float64
		h100   int32
	}{
		{"no prefix hits", 0, 220000, 4},
		{"half the prompt tokens cached", 0.5, 164000, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := decision.Group{ModelID: "m", SchedulerQueueSize: 100,
				Variants: []decision.Variant{
					{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
					{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 8, CurrentReplicas: 1},
				},
				Replicas: []decision.ReplicaMetrics{rep("l4-a", "l4", 0.8, 4, 1000), rep("l4-b", "l4", 0.8, 4, 1000), rep("h100-a", "h100", 0.75, 4, 5000)},
			}
			for i := range g.Replicas {
				g.Replicas[i].PrefixCacheHitRate = c.hit
			}
			res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
			require.NoError(t, err)
			a := res.Details.(Analysis)
			assert.InDelta(t, c.hit, a.PrefixCacheHitRate, 1e-12)
			assert.InDelta(t, c.demand, a.Total.Demand, 1e-6)
			assert.InDelta(t, c.demand/0.85-89600, res.Signal.RequiredCapacity, 1e-6)
			assert.Equal(t, map[string]int32{"l4": 2, "h100": c.h100}, targets(optimizer.OptimizeGroup(g, res.Signal)))
		})
	}
}

// Spare capacity is removed from the most expensive per token first:
// 4 L4 at 0.2*16,000 = 3,200 tokens, no queue: D = 12,800, supply 51,200,
// SC = 51,200 - 12,800/0.70 = 32,914.29 -> floor(32,914.29/12,800) = 2 removed.
func TestScaleDown(t *testing.T) {
	g := decision.Group{ModelID: "m", Variants: []decision.Variant{{Name: "l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 4}}}
	for i := range 4 {
		g.Replicas = append(g.Replicas, rep(fmt.Sprint(i), "l4", 0.2, 0, 1000))
	}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.InDelta(t, 51200-12800/0.70, res.Signal.SpareCapacity, 1e-6)
	assert.Equal(t, map[string]int32{"l4": 2}, targets(optimizer.OptimizeGroup(g, res.Signal)))
}

// A variant scaled to zero keeps the capacity it had; the state survives
// JSON (a restart) and is never modified in place.
func TestRememberedCapacity(t *testing.T) {
	v := []decision.Variant{
		{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 1},
		{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 0, MaxReplicas: 8, CurrentReplicas: 1},
	}
	g := decision.Group{ModelID: "m", Variants: v, Replicas: []decision.ReplicaMetrics{rep("l4-a", "l4", 0.5, 0, 1000), rep("h100-a", "h100", 0.5, 0, 5000)}}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	stored, err := json.Marshal(res.State)
	require.NoError(t, err)

	// Next cycle: the H100 is at zero; demand piles up on the L4.
	g.Variants[1].CurrentReplicas = 0
	g.Replicas = []decision.ReplicaMetrics{rep("l4-a", "l4", 0.8, 10, 1000)}
	res, err = Analyzer{}.AnalyzeState(g, defaults(), json.RawMessage(stored))
	require.NoError(t, err)
	a := res.Details.(Analysis)
	assert.Equal(t, CapacityRemembered, a.Variants[0].CapacitySource, a.Variants[0].Name)
	assert.Equal(t, "h100", a.Variants[0].Name)
	assert.Equal(t, 64000.0, a.Variants[0].PerReplicaCapacity)
	assert.Equal(t, 64000.0, res.Signal.CapacityPerReplica["h100"])

	// Variants that left the group are forgotten.
	g.Variants = g.Variants[:1]
	res, err = Analyzer{}.AnalyzeState(g, defaults(), res.State)
	require.NoError(t, err)
	assert.NotContains(t, res.State.(State).Variants, "h100")

	// The caller's value is not modified.
	prev := State{Analyzer: Name, History: map[string][]float64{"L4|0|medium": {1}}, Variants: map[string]VariantMemory{"l4": {PerReplicaCapacity: 1}}}
	g.Replicas = []decision.ReplicaMetrics{rep("l4-a", "l4", 0.8, 10, 1000)}
	_, err = Analyzer{}.AnalyzeState(g, defaults(), prev)
	require.NoError(t, err)
	assert.Equal(t, []float64{1}, prev.History["L4|0|medium"])
	assert.Equal(t, 1.0, prev.Variants["l4"].PerReplicaCapacity)
}

func TestNoCapacityKnown(t *testing.T) {
	v := []decision.Variant{
		{Name: "b", Cost: 10, MinReplicas: 0, MaxReplicas: 4},
		{Name: "a", Cost: 5, MinReplicas: 0, MaxReplicas: 4},
	}
	g := decision.Group{ModelID: "m", Variants: v, SchedulerQueueSize: 3, SchedulerQueueBytes: 12000}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.Contains(t, res.Signal.Reason, "no capacity known")
	assert.Equal(t, map[string]int32{"a": 1, "b": 0}, targets(optimizer.OptimizeGroup(g, res.Signal)))

	g.Variants[1].CurrentReplicas, g.Variants[1].PendingReplicas = 1, 1
	res, err = Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.Zero(t, res.Signal.RequiredCapacity)
	assert.Contains(t, res.Signal.Reason, "waiting for 1 pending")

	// A zero-replica variant with engine args is priced from them and the
	// remembered workload; one without borrows the other's capacity.
	g = decision.Group{ModelID: "m", Variants: []decision.Variant{
		{Name: "args", Cost: 5, MaxReplicas: 4, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64},
		{Name: "bare", Cost: 5, MaxReplicas: 4},
	}}
	st := State{Analyzer: Name, Workload: &Workload{AvgInputTokens: 1000, AvgOutputTokens: 200}}
	res, err = Analyzer{}.AnalyzeState(g, defaults(), st)
	require.NoError(t, err)
	a := res.Details.(Analysis)
	// N = min(2048*200/1200, 64) = 64; 64*1100 = 70,400.
	// Its useful capacity (for ranking) is the same derivation; "bare" has
	// none, so the signal ranks by capacity.
	assert.Equal(t, VariantCapacity{Name: "args", Role: decision.RoleBoth, PerReplicaCapacity: 70400, CapacitySource: CapacityDerived, CostPerMTokens: 5 / 70400.0 * 1e6, UsefulCapacity: 70400}, a.Variants[0])
	assert.Nil(t, res.Signal.UsefulCapacityPerReplica)
	assert.Equal(t, CapacityAssumed, a.Variants[1].CapacitySource)
	assert.Equal(t, 70400.0, a.Variants[1].PerReplicaCapacity)
	assert.Equal(t, "remembered", a.WorkloadSource)
}

// Prefill/decode disaggregation: each role has its own supply and demand,
// and the signal carries one part per role. Prefill pod: KV 16,000, 6,400
// in use, queue 2 * I = 2,000 -> 8,400; decode pod: KV 80,000, 60,000 in
// use, queue 2 * (I+O) = 2,400 -> 62,400. EPP 10 requests: in 10,000 to
// prefill, in + out 12,000 to decode.
func TestDisaggregated(t *testing.T) {
	g := decision.Group{ModelID: "m", SchedulerQueueSize: 10, Variants: []decision.Variant{
		{Name: "p", Role: decision.RolePrefill, Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1},
		{Name: "d", Role: decision.RoleDecode, Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1},
	}, Replicas: []decision.ReplicaMetrics{rep("p-0", "p", 0.4, 2, 1000), rep("d-0", "d", 0.75, 2, 5000)}}
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	a := res.Details.(Analysis)
	require.True(t, a.Disaggregated)
	require.Len(t, a.Roles, 2)
	pre, dec := a.Roles[0], a.Roles[1]
	assert.Equal(t, decision.RolePrefill, pre.Role)
	// Prefill: D = 8,400 + 10,000 = 18,400, supply 12,800:
	// RC = 18,400/0.85 - 12,800 = 8,847.06.
	assert.Equal(t, 18400.0, pre.Demand)
	assert.InDelta(t, 18400/0.85-12800, pre.RequiredCapacity, 1e-6)
	// Decode: D = 62,400 + 12,000 = 74,400, supply 64,000:
	// RC = 74,400/0.85 - 64,000 = 23,529.41.
	assert.Equal(t, 74400.0, dec.Demand)
	assert.InDelta(t, 74400/0.85-64000, dec.RequiredCapacity, 1e-6)
	require.Len(t, res.Signal.Roles, 2)
	assert.Equal(t, []string{"p"}, res.Signal.Roles[0].Variants)
	assert.Equal(t, []string{"d"}, res.Signal.Roles[1].Variants)
	assert.InDelta(t, pre.RequiredCapacity+dec.RequiredCapacity, res.Signal.RequiredCapacity, 1e-6)
}

// Property: with capacity fixed (queues below the threshold, so k2 comes
// from the engine args, not from the demand), more demand - tokens in use,
// local queues, EPP queue - never yields fewer replicas. (Where k2 is
// observed, capacity is measured from the demand itself, so that path is
// excluded on purpose.)
func TestMoreDemandNeverFewerReplicas(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		g := decision.Group{ModelID: "m", Variants: []decision.Variant{
			{Name: "a", Cost: 1 + 20*rng.Float64(), MinReplicas: 1, MaxReplicas: 30, CurrentReplicas: 1 + rng.Int32N(4), MaxNumSeqs: 64},
			{Name: "b", Cost: 1 + 20*rng.Float64(), MinReplicas: 1, MaxReplicas: 30, CurrentReplicas: 1 + rng.Int32N(4), MaxNumSeqs: 128},
		}}
		blocks := map[string]int64{"a": 1000 + rng.Int64N(4000), "b": 1000 + rng.Int64N(4000)}
		base := rng.Float64() * 0.5
		prev := int32(-1)
		var state any
		for step := range 8 {
			grow := float64(step) / 8
			gg := g
			gg.Replicas = nil
			gg.SchedulerQueueSize = float64(step * 5)
			for _, v := range g.Variants {
				for k := range v.CurrentReplicas {
					queue := float64(min(step, 4)) // stays below queueLengthThreshold 5
					gg.Replicas = append(gg.Replicas, rep(fmt.Sprintf("%s-%d", v.Name, k), v.Name, base+grow*0.5, queue, blocks[v.Name]))
				}
			}
			cfg := defaults()
			if trial%2 == 1 {
				// With stabilization on, from a remembered lower demand.
				cfg.Scaling.ScaleDownStabilizationCycles = 10
			}
			if trial%4 >= 2 {
				// The backlog drained over 2 minutes (ITL below).
				cfg.Scaling.BacklogDrainSeconds = 120
				for i := range gg.Replicas {
					gg.Replicas[i].AvgITLms = 50
				}
			}
			res, err := Analyzer{}.AnalyzeState(gg, cfg, state)
			require.NoError(t, err)
			if trial%2 == 1 {
				state = res.State
			}
			var total int32
			for _, n := range targets(optimizer.OptimizeGroup(gg, res.Signal)) {
				total += n
			}
			require.GreaterOrEqual(t, total, prev, "trial %d step %d: %s", trial, step, res.Signal.Reason)
			prev = total
		}
	}
}

func targets(ts []decision.Target) map[string]int32 {
	out := map[string]int32{}
	for _, t := range ts {
		out[t.Variant] = t.Replicas
	}
	return out
}

// Scale-down stabilization: spare capacity comes from the highest demand
// of the last scaleDownStabilizationCycles cycles. 4 L4 (k1 = 12,800 each,
// supply 51,200); a cycle at 0.8 usage (D = 4*12,800 = 51,200) then cycles
// at 0.2 usage (D = 12,800).
func TestScaleDownStabilization(t *testing.T) {
	g := func(usage float64) decision.Group {
		g := decision.Group{ModelID: "m", Variants: []decision.Variant{{Name: "l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 4}}}
		for i := range 4 {
			g.Replicas = append(g.Replicas, rep(fmt.Sprint(i), "l4", usage, 0, 1000))
		}
		return g
	}
	cases := []struct {
		name   string
		cycles int
		// spare after each low cycle following the burst
		spare []float64
	}{
		// Off: the first quiet cycle already frees 51,200 - 12,800/0.70.
		{"off", 0, []float64{51200 - 12800/0.70, 51200 - 12800/0.70, 51200 - 12800/0.70}},
		{"one cycle is off", 1, []float64{51200 - 12800/0.70, 51200 - 12800/0.70, 51200 - 12800/0.70}},
		// 3 cycles: the burst is in the window for two more cycles (its
		// demand 51,200/0.70 > supply: no spare), then drops out.
		{"three cycles", 3, []float64{0, 0, 51200 - 12800/0.70}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Scaling.ScaleDownStabilizationCycles = c.cycles
			res, err := Analyzer{}.AnalyzeState(g(0.8), cfg, nil)
			require.NoError(t, err)
			assert.Zero(t, res.Signal.SpareCapacity)
			state := res.State
			for i, want := range c.spare {
				// Through JSON, as the engine stores it.
				raw, err := json.Marshal(state)
				require.NoError(t, err)
				res, err = Analyzer{}.AnalyzeState(g(0.2), cfg, json.RawMessage(raw))
				require.NoError(t, err)
				assert.InDelta(t, want, res.Signal.SpareCapacity, 1e-6, "quiet cycle %d", i+1)
				assert.Zero(t, res.Signal.RequiredCapacity, "stabilization never adds replicas")
				state = res.State
			}
			if c.cycles > 1 {
				assert.Len(t, res.State.(State).Demand[decision.RoleBoth], c.cycles, "the window is bounded")
			}
		})
	}
}

// A replica reporting a non-finite ITL contributes no ITL: the mean is the
// other replica's, and the analysis still serializes (the adapter's debug
// endpoint and `wva decide --json` write it).
func TestNonFiniteITLIgnored(t *testing.T) {
	v := decision.Variant{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 30, CurrentReplicas: 2, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8}
	for _, bad := range []float64{math.Inf(1), math.NaN()} {
		g := decision.Group{ModelID: "m", Variants: []decision.Variant{v}}
		a, b := rep("a", "l4", 0.5, 2, 1000), rep("b", "l4", 0.5, 2, 1000)
		a.AvgITLms, b.AvgITLms = 60, bad
		g.Replicas = []decision.ReplicaMetrics{a, b}
		cfg := defaults()
		cfg.Scaling.BacklogDrainSeconds = 120
		res, err := Analyzer{}.AnalyzeState(g, cfg, nil)
		require.NoError(t, err)
		an := res.Details.(Analysis)
		assert.InDelta(t, 60, an.AvgITLms, 1e-9, "ITL %v", bad)
		assert.InDelta(t, 0.1, an.BacklogWeight, 1e-12, "ITL %v", bad)
		_, err = json.Marshal(an)
		assert.NoError(t, err, "ITL %v", bad)
	}
}

// Settling: a third replica turned Ready 14 s ago; the first two still
// read their peak (max_over_time), which on three replicas would ask for
// a fourth. KV = 1000*16 = 16,000 tokens, capacity k1 = 12,800 per replica.
func TestSettling(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 53, 17, 0, time.UTC)
	old := now.Add(-10 * time.Minute)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	ready := func(pod string, usage float64, readyAt time.Time) decision.ReplicaMetrics {
		r := rep(pod, "l4", usage, 0, 1000)
		r.ReadyAt = readyAt
		return r
	}
	group := func(clock, lastReady time.Time, replicas ...decision.ReplicaMetrics) decision.Group {
		return decision.Group{ModelID: "m", Now: clock, Replicas: replicas, Variants: []decision.Variant{
			{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3, LastReadyAt: lastReady}}}
	}
	cases := []struct {
		name     string
		g        decision.Group
		settling string // fragment; "" = the scale-up stands
	}{
		// D = 2*12,640 + 8,480 = 33,760; D/0.85 = 39,718 > 38,400.
		{"the new replica at 0.66 of its capacity: no fourth",
			group(now, at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.53, at(14*time.Second))),
			"the replicas Ready within it (1) are at 0.662 of their capacity, within 0.85"},
		{"the new replica over the threshold too (0.90): scale up",
			group(now, at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.72, at(14*time.Second))),
			""},
		{"Ready a window ago: every reading is after it, the scale-up stands",
			group(now, at(time.Minute), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.53, at(time.Minute))),
			""},
		{"Ready but not reported yet: no fourth on the old readings",
			group(now, at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old)),
			"no replica Ready since reports metrics yet"},
		{"Ready times unknown: upstream's verdict",
			group(now, time.Time{}, ready("a", 0.79, time.Time{}), ready("b", 0.79, time.Time{}), ready("c", 0.53, time.Time{})),
			""},
		{"no clock: upstream's verdict",
			group(time.Time{}, at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.53, at(14*time.Second))),
			""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Analyzer{}.AnalyzeState(tc.g, defaults(), nil)
			require.NoError(t, err)
			a := res.Details.(Analysis)
			require.Greater(t, a.Total.Demand/0.85, a.Total.AnticipatedSupply, "the readings ask for a scale-up")
			assert.Contains(t, a.Total.Settling, tc.settling)
			assert.Equal(t, tc.settling == "", a.Total.Settling == "", a.Total.Settling)
			assert.Equal(t, tc.settling == "", res.Signal.RequiredCapacity > 0, res.Signal.Reason)
			if tc.settling != "" {
				assert.Contains(t, res.Signal.Reason, "settling: ")
				assert.Equal(t, tc.g.Variants[0].CurrentReplicas, targets(optimizer.OptimizeGroup(tc.g, res.Signal))["l4"])
			}
		})
	}
}

// Settling never withholds a scale-down: a fresh replica on a quiet group.
func TestSettlingKeepsScaleDown(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 53, 17, 0, time.UTC)
	g := decision.Group{ModelID: "m", Now: now, Variants: []decision.Variant{
		{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3, LastReadyAt: now.Add(-10 * time.Second)}},
		Replicas: []decision.ReplicaMetrics{rep("a", "l4", 0.1, 0, 1000), rep("b", "l4", 0.1, 0, 1000), rep("c", "l4", 0.05, 0, 1000)}}
	g.Replicas[2].ReadyAt = now.Add(-10 * time.Second)
	res, err := Analyzer{}.AnalyzeState(g, defaults(), nil)
	require.NoError(t, err)
	assert.Empty(t, res.Details.(Analysis).Total.Settling)
	assert.Greater(t, res.Signal.SpareCapacity, 0.0)
	assert.Zero(t, res.Signal.RequiredCapacity)
}
