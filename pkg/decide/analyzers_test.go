package decide

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/analyzer/queueing"
	"github.com/wva-project/wva/pkg/analyzer/token"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func tokenConfig(t *testing.T, extra string) params.Resolved {
	t.Helper()
	store := config.NewStore()
	require.NoError(t, store.Apply(config.SaturationConfigMapName, map[string]string{config.DefaultKey: "analyzerName: saturation\n" + extra}))
	return store.Resolve("m", "ns")
}

// tokenPods: KV 1000*16 = 16,000 tokens (capacity 12,800), I 1000, O 200.
func tokenPods(variant string, usage, queue float64, n int) []decision.ReplicaMetrics {
	out := make([]decision.ReplicaMetrics, n)
	for i := range out {
		out[i] = decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", variant, i), Variant: variant, KvCacheUsage: usage, QueueLength: queue,
			NumGPUBlocks: 1000, BlockSize: 16, AvgInputTokens: 1000, AvgOutputTokens: 200}
	}
	return out
}

func TestDefaultRegistersEveryAnalyzer(t *testing.T) {
	p := Default()
	for _, name := range []string{params.AnalyzerSaturationPercentage, params.AnalyzerSaturationToken, params.AnalyzerQueueingModel, params.AnalyzerSLOPlanner} {
		assert.Contains(t, p.Analyzers, name)
	}
	store := config.NewStore()
	assert.Equal(t, params.AnalyzerSLOPlanner, store.Resolve("m", "ns").Analyzer(), "without ConfigMaps the slo-planner runs")
	require.NoError(t, store.Apply(config.QueueingModelConfigMapName, map[string]string{config.DefaultKey: "sloMultiplier: 3"}))
	assert.Equal(t, queueing.Name, store.Resolve("m", "ns").Analyzer(), "the queueing ConfigMap selects the SLO analyzer")
}

// The token analyzer's memory flows through Run: out as GroupResult.State,
// back as GroupInput.State; a cycle without metrics keeps it.
func TestStateFlowsThroughRun(t *testing.T) {
	cfg := tokenConfig(t, "")
	v := []decision.Variant{
		{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 1},
		{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 1},
	}
	g := decision.Group{ModelID: "m", Namespace: "ns", Variants: v, Replicas: append(tokenPods("l4", 0.5, 0, 1), tokenPods("h100", 0.5, 0, 1)...)}
	in := GroupInput{Group: g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}
	res := Default().Run(t0, []GroupInput{in})[0]
	require.NoError(t, res.Err)
	require.IsType(t, token.State{}, res.State)

	// Metrics unreachable: the analyzer does not run, the state is kept.
	in.State, in.Metrics = res.State, MetricsUnreachable
	kept := Default().Run(t0, []GroupInput{in})[0]
	assert.Equal(t, res.State, kept.State)

	// Stored as JSON and handed back: the H100, now at zero, keeps its
	// capacity (KV 16,000 * 0.8 = 12,800).
	b, err := json.Marshal(res.State)
	require.NoError(t, err)
	g.Variants[1].CurrentReplicas = 0
	g.Replicas = tokenPods("l4", 0.9, 8, 1)
	in = GroupInput{Group: g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0), State: json.RawMessage(b)}
	res = Default().Run(t0, []GroupInput{in})[0]
	require.NoError(t, res.Err)
	a := res.Analysis.(token.Analysis)
	assert.Equal(t, token.CapacityRemembered, a.Variants[0].CapacitySource)
	assert.Equal(t, 12800.0, res.Signal.CapacityPerReplica["h100"])
}

// Limited mode: groups without enableLimiter take what they need first;
// the limited groups share the rest by priority score.
func TestLimitedModeSharesWhatIsLeft(t *testing.T) {
	free := tokenConfig(t, "")
	hi := tokenConfig(t, "enableLimiter: true\npriority: 2")
	lo := tokenConfig(t, "enableLimiter: true\npriority: 1")
	mk := func(model string, cfg params.Resolved) GroupInput {
		// 2 replicas at 12,800 in use + queue 4 * 1,200: D = 2 * 17,600 =
		// 35,200; RC = 35,200/0.85 - 25,600 = 15,811.76 -> +2 replicas.
		v := []decision.Variant{{Name: model + "-v", Accelerator: "H100", GPUsPerReplica: 1, Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}}
		return GroupInput{Group: decision.Group{ModelID: model, Namespace: "ns", Variants: v, Replicas: tokenPods(model+"-v", 0.8, 4, 2)},
			Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}
	}
	inputs := []GroupInput{mk("free", free), mk("hi", hi), mk("lo", lo)}

	p := Default()
	p.Budget = decision.Free{"H100": 3}
	res := p.Run(t0, inputs)
	// free takes +2 (not limited), 1 GPU is left: it goes to the priority-2 group.
	assert.Equal(t, map[string]int32{"free-v": 4}, targetsOf(res[0].Targets))
	assert.Equal(t, map[string]int32{"hi-v": 3}, targetsOf(res[1].Targets))
	assert.Equal(t, map[string]int32{"lo-v": 2}, targetsOf(res[2].Targets))
	assert.Equal(t, decision.RuleGPULimited, res[2].Targets[0].Rule)
	assert.Contains(t, res[2].Targets[0].Reason, "H100 budget 1 GPUs, 0 left")

	// Without an inventory the limiter has nothing to share: cost-aware.
	res = Default().Run(t0, inputs)
	for i, r := range res {
		assert.Equal(t, int32(4), r.Targets[0].Replicas, "group %d", i)
	}
}

// A disaggregated group is optimized per role: decode pressure grows the
// decode variant, never the (cheaper) prefill one.
func TestDisaggregatedRolesOptimizedApart(t *testing.T) {
	cfg := tokenConfig(t, "")
	v := []decision.Variant{
		{Name: "prefill", Role: decision.RolePrefill, Cost: 1, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
		{Name: "decode", Role: decision.RoleDecode, Cost: 10, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
	}
	// Prefill pods idle (0.1*16,000 = 1,600 each): spare = 25,600 - 3,200/0.7
	// = 21,028.57 -> floor(21,028.57/12,800) = 1 removed. Decode pods full:
	// 12,800 + 4*1,200 = 17,600 each; RC = 35,200/0.85 - 25,600 = 15,811.76
	// -> ceil(15,811.76/12,800) = 2 added.
	g := decision.Group{ModelID: "m", Namespace: "ns", Variants: v, Replicas: append(tokenPods("prefill", 0.1, 0, 2), tokenPods("decode", 0.8, 4, 2)...)}
	res := Default().Run(t0, []GroupInput{{Group: g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}})[0]
	require.NoError(t, res.Err)
	assert.Equal(t, map[string]int32{"prefill": 1, "decode": 4}, targetsOf(res.Targets))
	for _, tg := range res.Targets {
		assert.Contains(t, tg.Reason, tg.Variant+" role", tg.Reason)
	}
}

// Through Run, the token analyzer's useful capacity decides where a
// scale-up goes. KV: l4 16,000 tokens (capacity 12,800), h100 3,600*16 =
// 57,600 (46,080): the h100 is cheaper per KV token (15/46,080 <
// 5/12,800). Engine args: the h100 schedules 128 sequences to the l4's 64
// (twice, not 3.6x), so it is dearer per useful token. Demand 66,240,
// supply 58,880: RC = 66,240/0.85 - 58,880 = 19,049 -> +2 l4 (12,800
// each). The limiter, with one L4 GPU left, grants the l4 first (+1),
// then the h100 the rest (+1). Without the l4's engine args the ranking
// falls back to KV capacity: +1 h100.
func TestRunRanksByUsefulCapacity(t *testing.T) {
	variants := func(l4Args bool) []decision.Variant {
		l4 := decision.Variant{Name: "l4", Accelerator: "L4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1}
		if l4Args {
			l4.MaxNumBatchedTokens, l4.MaxNumSeqs = 2048, 64
		}
		h100 := decision.Variant{Name: "h100", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1, MaxNumBatchedTokens: 4096, MaxNumSeqs: 128}
		return []decision.Variant{l4, h100}
	}
	pods := append(tokenPods("l4", 0.9, 0, 1), tokenPods("h100", 0.9, 0, 1)...)
	pods[1].NumGPUBlocks = 3600
	for _, tc := range []struct {
		name    string
		l4Args  bool
		limited bool
		want    map[string]int32
	}{
		{"cost-aware, args on both", true, false, map[string]int32{"l4": 3, "h100": 1}},
		{"limited, args on both", true, true, map[string]int32{"l4": 2, "h100": 2}},
		{"cost-aware, l4 args unknown", false, false, map[string]int32{"l4": 1, "h100": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := ""
			p := Default()
			if tc.limited {
				extra = "enableLimiter: true\n"
				p.Budget = decision.Free{"L4": 1, "H100": 4}
			}
			g := decision.Group{ModelID: "m", Namespace: "ns", Variants: variants(tc.l4Args), Replicas: pods}
			res := p.Run(t0, []GroupInput{{Group: g, Config: tokenConfig(t, extra), Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}})[0]
			require.NoError(t, res.Err)
			got := map[string]int32{}
			for _, tg := range res.Targets {
				got[tg.Variant] = tg.Replicas
			}
			assert.Equal(t, tc.want, got, res.Signal.Reason)
		})
	}
}
