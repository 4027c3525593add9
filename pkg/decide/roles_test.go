package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Transition blocking is per role: a variant of one role still applying a
// decision (or with replicas not yet reporting) holds its role's variants,
// never the other role's. A group without roles blocks model-wide, as
// before.
func TestTransitionBlockingPerRole(t *testing.T) {
	cfg := percentage(t)
	variant := func(name string, role decision.Role, cost float64, current, desired int32) decision.Variant {
		return decision.Variant{Name: name, Role: role, Cost: cost, MinReplicas: 1, MaxReplicas: 10,
			CurrentReplicas: current, DesiredReplicas: desired, LastUpdate: t0.Add(-time.Minute)}
	}
	saturated := func(name string, n int) []decision.ReplicaMetrics { return pods(name, repeat(0.9, n)...) }
	steady := func(name string, n int) []decision.ReplicaMetrics { return pods(name, repeat(0.5, n)...) }
	for _, tc := range []struct {
		name     string
		variants []decision.Variant
		replicas [][]decision.ReplicaMetrics
		want     map[string]int32
		blocked  []string
	}{
		{"decode applying a scale-up does not block a saturated prefill",
			[]decision.Variant{variant("prefill", decision.RolePrefill, 1, 2, 2), variant("decode", decision.RoleDecode, 10, 2, 3)},
			[][]decision.ReplicaMetrics{saturated("prefill", 2), steady("decode", 2)},
			map[string]int32{"prefill": 3, "decode": 3}, []string{"decode"}},
		{"prefill replica not reporting yet does not block a saturated decode",
			[]decision.Variant{variant("prefill", decision.RolePrefill, 1, 3, 3), variant("decode", decision.RoleDecode, 10, 2, 2)},
			[][]decision.ReplicaMetrics{steady("prefill", 2), saturated("decode", 2)},
			map[string]int32{"prefill": 3, "decode": 3}, []string{"prefill"}},
		{"within a role the blocking stays: one decode variant in transition holds the other",
			[]decision.Variant{variant("prefill", decision.RolePrefill, 1, 2, 2),
				variant("decode-a", decision.RoleDecode, 10, 2, 3), variant("decode-b", decision.RoleDecode, 5, 2, 2)},
			[][]decision.ReplicaMetrics{steady("prefill", 2), steady("decode-a", 2), saturated("decode-b", 2)},
			map[string]int32{"prefill": 2, "decode-a": 3, "decode-b": 2}, []string{"decode-a", "decode-b"}},
		{"both roles in transition: both held",
			[]decision.Variant{variant("prefill", decision.RolePrefill, 1, 2, 3), variant("decode", decision.RoleDecode, 10, 2, 3)},
			[][]decision.ReplicaMetrics{saturated("prefill", 2), saturated("decode", 2)},
			map[string]int32{"prefill": 3, "decode": 3}, []string{"prefill", "decode"}},
		{"no roles: blocking is model-wide, as before",
			[]decision.Variant{variant("a", "", 1, 2, 2), variant("b", "", 10, 2, 3)},
			[][]decision.ReplicaMetrics{saturated("a", 2), steady("b", 2)},
			map[string]int32{"a": 2, "b": 3}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := decision.Group{ModelID: "m", Namespace: "ns", Variants: tc.variants}
			for _, r := range tc.replicas {
				g.Replicas = append(g.Replicas, r...)
			}
			res := Default().Run(t0, []GroupInput{{Group: g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}})[0]
			require.NoError(t, res.Err)
			assert.Equal(t, tc.want, targetsOf(res.Targets))
			var blocked []string
			for _, tg := range res.Targets {
				if tg.Action == decision.ActionBlocked {
					blocked = append(blocked, tg.Variant)
				}
			}
			assert.ElementsMatch(t, tc.blocked, blocked)
		})
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// Through the default analyzer (slo-planner) and the optimizer, a P/D
// group short on decode grows decode and keeps the cheaper prefill.
func TestPlannerScalesDecodeNotPrefill(t *testing.T) {
	g := decision.Group{ModelID: "m", Namespace: "ns", GatewayArrivalRate: 12, GatewayArrivalsReported: true,
		Variants: []decision.Variant{
			{Name: "prefill", Role: decision.RolePrefill, Cost: 1, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 2, StartupDelay: 2 * time.Minute},
			{Name: "decode", Role: decision.RoleDecode, Cost: 10, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 2, MaxNumSeqs: 64, StartupDelay: 2 * time.Minute},
		}}
	for i, v := range []string{"prefill", "prefill", "decode", "decode"} {
		r := decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", v, i), Variant: v, ArrivalRate: 6, AvgInputTokens: 800, AvgOutputTokens: 200}
		if v == "prefill" {
			r.AvgTTFTms = 200
		} else {
			r.NumGPUBlocks, r.BlockSize, r.AvgITLms = 8192, 16, 40
		}
		g.Replicas = append(g.Replicas, r)
	}
	cfg := config.NewStore().Resolve("m", "ns") // the built-in default: slo-planner
	res := Default().Run(t0, []GroupInput{{Group: g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}})[0]
	require.NoError(t, res.Err)
	got := targetsOf(res.Targets)
	assert.Equal(t, int32(2), got["prefill"], "%v", res.Targets)
	assert.Greater(t, got["decode"], int32(2), "%v", res.Targets)
}

// Through the queueing-model analyzer and the optimizer: prefill replicas
// far past the TTFT target grow prefill while decode, with room, keeps its
// replicas; a group short on decode grows decode, never the cheaper
// prefill.
func TestQueueingScalesTheShortRole(t *testing.T) {
	store := config.NewStore()
	require.NoError(t, store.Apply(config.QueueingModelConfigMapName, map[string]string{config.DefaultKey: "targetTTFT: 500"}))
	cfg := store.Resolve("m", "ns")
	require.Equal(t, params.AnalyzerQueueingModel, cfg.Analyzer())
	fleet := func(prefillTTFTms, decodeITLms float64, decode int) decision.Group {
		g := decision.Group{ModelID: "m", Namespace: "ns", Variants: []decision.Variant{
			{Name: "prefill", Role: decision.RolePrefill, Cost: 1, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 2},
			{Name: "decode", Role: decision.RoleDecode, Cost: 10, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: int32(decode)},
		}}
		// 12 req/s pass through both roles.
		for i := range 2 {
			g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: fmt.Sprintf("prefill-%d", i), Variant: "prefill",
				ArrivalRate: 6, AvgTTFTms: prefillTTFTms, AvgInputTokens: 1000, AvgOutputTokens: 1})
		}
		for i := range decode {
			g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: fmt.Sprintf("decode-%d", i), Variant: "decode",
				ArrivalRate: 12 / float64(decode), AvgTTFTms: 300, AvgITLms: decodeITLms, AvgInputTokens: 1000, AvgOutputTokens: 200})
		}
		return g
	}
	for _, tc := range []struct {
		name string
		g    decision.Group
		want map[string]int32
	}{
		// Prefill: mu = 6 + 1000/2000 = 6.5, 4.5 req/s each at 500 ms:
		// RC 3 -> +1. Decode, seeded from its replicas, serves 8.64 req/s
		// each at its observed ITL with headroom: spare 5.28, steady.
		{"prefill short", fleet(2000, 20, 2), map[string]int32{"prefill": 3, "decode": 2}},
		// Prefill: mu = 16, 14 req/s each, spare 16 -> one removed. One
		// decode replica at 12 req/s serves 9.4 there: RC 2.6 -> +1.
		{"decode short", fleet(100, 150, 1), map[string]int32{"prefill": 1, "decode": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Default().Run(t0, []GroupInput{{Group: tc.g, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(10.0)}})[0]
			require.NoError(t, res.Err)
			got := targetsOf(res.Targets)
			assert.Equal(t, tc.want, got, res.Signal.Reason)
			require.Len(t, res.Signal.Roles, 2, res.Signal.Reason)
		})
	}
}
