package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/analyzer/saturation"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// percentage is the built-in configuration with the percentage analyzer
// selected, as a ConfigMap entry does: the design notes' examples below are
// its decisions (the built-in default is the slo-planner).
func percentage(t *testing.T) params.Resolved {
	t.Helper()
	store := config.NewStore()
	require.NoError(t, store.Apply(config.SaturationConfigMapName, map[string]string{config.DefaultKey: "analyzerName: " + params.AnalyzerSaturationPercentage}))
	return store.Resolve("meta/llama-70b", "prod")
}

func pods(variant string, kv ...float64) []decision.ReplicaMetrics {
	out := make([]decision.ReplicaMetrics, len(kv))
	for i, k := range kv {
		out[i] = decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", variant, i), Variant: variant, KvCacheUsage: k}
	}
	return out
}

func targetsOf(ts []decision.Target) map[string]int32 {
	out := map[string]int32{}
	for _, t := range ts {
		out[t.Variant] = t.Replicas
	}
	return out
}

// The design notes' examples, end to end through analyzer, optimizer and
// enforcer.
func TestSeedExamples(t *testing.T) {
	cases := []struct {
		name     string
		variants []decision.Variant
		replicas []decision.ReplicaMetrics
		want     map[string]int32
		actions  map[string]decision.Action
	}{
		{
			// saturation-analyzer.md "model stable": v1-l4 2 -> 3.
			name: "stable model scales up the cheapest variant",
			variants: []decision.Variant{
				{Name: "v1-l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
				{Name: "v2-a100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
			},
			replicas: append(pods("v1-l4", 0.76, 0.75), pods("v2-a100", 0.74, 0.73)...),
			want:     map[string]int32{"v1-l4": 3, "v2-a100": 2},
			actions:  map[string]decision.Action{"v1-l4": decision.ActionScaleUp, "v2-a100": decision.ActionNone},
		},
		{
			// saturation-analyzer.md "model in transition": v2-a100 has 3 of
			// 4 pods reporting, so nothing moves even though KV is tight.
			name: "transition blocks every variant of the model",
			variants: []decision.Variant{
				{Name: "v1-l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
				{Name: "v2-a100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 4},
			},
			replicas: append(pods("v1-l4", 0.76, 0.75), pods("v2-a100", 0.74, 0.73, 0.79)...),
			want:     map[string]int32{"v1-l4": 2, "v2-a100": 4},
			actions:  map[string]decision.Action{"v1-l4": decision.ActionBlocked, "v2-a100": decision.ActionBlocked},
		},
		{
			// saturation-analyzer-older.md: v2-a100 desired 4, current 4, 3
			// ready. The newer rule (metrics != current) blocks v1-l4 too.
			name: "older example under the newer rule: blocked",
			variants: []decision.Variant{
				{Name: "v1-l4", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
				{Name: "v2-a100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 4, DesiredReplicas: 4, PendingReplicas: 1, LastUpdate: t0.Add(-time.Minute)},
			},
			replicas: append(pods("v1-l4", 0.79, 0.79), pods("v2-a100", 0.79, 0.79, 0.79)...),
			want:     map[string]int32{"v1-l4": 2, "v2-a100": 4},
		},
		{
			// Multi-variant example: variant-2 (H100, $15) is cheaper than
			// variant-1 (A100, $20): under pressure it grows.
			name: "multi-variant example, scale-up lands on the cheaper H100",
			variants: []decision.Variant{
				{Name: "variant-1", Accelerator: "A100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
				{Name: "variant-2", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3},
			},
			replicas: append(pods("variant-1", 0.78, 0.79), pods("variant-2", 0.75, 0.76, 0.77)...),
			want:     map[string]int32{"variant-1": 2, "variant-2": 4},
		},
		{
			name: "multi-variant example, scale-down lands on the dearer A100",
			variants: []decision.Variant{
				{Name: "variant-1", Accelerator: "A100", Cost: 20, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2},
				{Name: "variant-2", Accelerator: "H100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3},
			},
			replicas: append(pods("variant-1", 0.10, 0.15), pods("variant-2", 0.12, 0.11, 0.10)...),
			want:     map[string]int32{"variant-1": 1, "variant-2": 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := GroupInput{
				Group:               decision.Group{ModelID: "llama-70b", Namespace: "prod", Variants: tc.variants, Replicas: tc.replicas},
				Config:              percentage(t),
				Metrics:             MetricsAvailable,
				RequestsInRetention: ptr(100.0),
			}
			res := Default().Run(t0, []GroupInput{in})[0]
			require.NoError(t, res.Err)
			assert.Equal(t, saturation.Name, res.Analyzer)
			assert.Equal(t, tc.want, targetsOf(res.Targets))
			for _, tg := range res.Targets {
				if a, ok := tc.actions[tg.Variant]; ok {
					assert.Equal(t, a, tg.Action, tg.Reason)
				}
			}
		})
	}
}

// cluster is a tiny stand-in for the HPA and the pods: each cycle the HPA
// applies the decision at once, and a new pod reports metrics loadCycles
// cycles after it is created.
type cluster struct {
	variants   []decision.Variant
	startedAt  map[string][]int // cycle each pod was created
	loadCycles int
}

func (c *cluster) group(cycle int, kv float64) decision.Group {
	g := decision.Group{ModelID: "llama-70b", Namespace: "prod"}
	for i := range c.variants {
		v := &c.variants[i]
		ready := 0
		for _, started := range c.startedAt[v.Name] {
			if cycle-started >= c.loadCycles {
				ready++
			}
		}
		v.PendingReplicas = v.CurrentReplicas - int32(ready)
		kvs := make([]float64, ready)
		for k := range kvs {
			kvs[k] = kv
		}
		g.Replicas = append(g.Replicas, pods(v.Name, kvs...)...)
		g.Variants = append(g.Variants, *v)
	}
	return g
}

func (c *cluster) apply(cycle int, now time.Time, targets []decision.Target) {
	for i := range c.variants {
		v := &c.variants[i]
		want := targetsOf(targets)[v.Name]
		if want != v.DesiredReplicas {
			v.LastUpdate = now
		}
		v.DesiredReplicas = want
		for v.CurrentReplicas < want {
			v.CurrentReplicas++
			c.startedAt[v.Name] = append(c.startedAt[v.Name], cycle)
		}
		for v.CurrentReplicas > want {
			v.CurrentReplicas--
			c.startedAt[v.Name] = c.startedAt[v.Name][:v.CurrentReplicas]
		}
	}
}

// saturation-analyzer.md, "Timeline Example (With Protection)": saturation
// persists while the new pod loads (3 cycles of 30 s), yet the group goes to
// 3 replicas once, not 3 -> 4 -> 5.
func TestCascadeTimeline(t *testing.T) {
	c := &cluster{
		variants:   []decision.Variant{{Name: "variant-1", Cost: 5, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}},
		startedAt:  map[string][]int{"variant-1": {-10, -10}},
		loadCycles: 3,
	}
	var history []int32
	for cycle := 0; cycle < 6; cycle++ {
		now := t0.Add(time.Duration(cycle) * 30 * time.Second)
		// Load stays high until the third replica is ready and takes its share.
		g := c.group(cycle, 0.78)
		if g.MetricsCount("variant-1") == 3 {
			g = c.group(cycle, 0.52)
		}
		res := Default().Run(now, []GroupInput{{Group: g, Config: percentage(t), Metrics: MetricsAvailable, RequestsInRetention: ptr(50.0)}})[0]
		require.NoError(t, res.Err)
		c.apply(cycle, now, res.Targets)
		history = append(history, c.variants[0].CurrentReplicas)
		if cycle >= 1 && cycle <= 2 {
			assert.Equal(t, decision.ActionBlocked, res.Targets[0].Action, "cycle %d: new pod still loading, model in transition", cycle)
		}
	}
	assert.Equal(t, []int32{3, 3, 3, 3, 3, 3}, history)
}

func TestAnalyzerNotAvailableFallsBackToPreserve(t *testing.T) {
	store := config.NewStore()
	require.NoError(t, store.Apply(config.SaturationConfigMapName, map[string]string{config.DefaultKey: "analyzerName: saturation"}))
	in := GroupInput{
		Group:   decision.Group{ModelID: "m", Variants: []decision.Variant{{Name: "v", Cost: 1, MinReplicas: 1, MaxReplicas: 5, CurrentReplicas: 2, DesiredReplicas: 3, LastUpdate: t0}}},
		Config:  store.Resolve("m", ""),
		Metrics: MetricsAvailable,
	}
	p := Default()
	delete(p.Analyzers, params.AnalyzerSaturationToken)
	res := p.Run(t0, []GroupInput{in})[0]
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `analyzer "saturation-token" is not available`)
	assert.Equal(t, map[string]int32{"v": 3}, targetsOf(res.Targets), "previous decision preserved")
}

func TestRunKeepsGroupsApart(t *testing.T) {
	mk := func(model string, kv float64, metrics MetricsState) GroupInput {
		return GroupInput{
			Group: decision.Group{ModelID: model, Variants: []decision.Variant{{Name: model + "-v", Cost: 1, MinReplicas: 1, MaxReplicas: 5, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: t0.Add(-time.Hour)}},
				Replicas: pods(model+"-v", kv, kv)},
			Config: percentage(t), Metrics: metrics, RequestsInRetention: ptr(10.0),
		}
	}
	res := Default().Run(t0, []GroupInput{mk("a", 0.79, MetricsAvailable), mk("b", 0.1, MetricsUnreachable), mk("c", 0.05, MetricsAvailable)})
	require.Len(t, res, 3)
	assert.Equal(t, map[string]int32{"a-v": 3}, targetsOf(res[0].Targets))
	assert.Equal(t, map[string]int32{"b-v": 2}, targetsOf(res[1].Targets))
	assert.Nil(t, res[1].Analysis, "analyzer does not run without metrics")
	assert.Equal(t, map[string]int32{"c-v": 1}, targetsOf(res[2].Targets))
}

func ptr[T any](v T) *T { return &v }

// The pipeline hands the enforcer the group's gateway queue, pod load and
// wake times: through Run, none of these groups is decided to zero, and an
// idle one with the counter at 0 is.
func TestScaleToZeroNeedsEvidence(t *testing.T) {
	cfg := percentage(t)
	cfg.ScaleToZero = params.ScaleToZero{Enabled: true, RetentionPeriod: params.Duration(10 * time.Minute)}
	zero := 0.0
	one := func(extra func(*decision.Variant)) []decision.Variant {
		v := decision.Variant{Name: "v", Cost: 5, MaxReplicas: 8, CurrentReplicas: 4, DesiredReplicas: 4, LastUpdate: t0.Add(-time.Hour)}
		if extra != nil {
			extra(&v)
		}
		return []decision.Variant{v}
	}
	saturated := pods("v", 0.95, 0.95, 0.95, 0.95)
	idle := pods("v", 0, 0, 0, 0)
	cases := []struct {
		name     string
		metrics  MetricsState
		variants []decision.Variant
		replicas []decision.ReplicaMetrics
		queue    float64
		requests *float64
		want     int32
		rule     decision.Rule
	}{
		{name: "four saturated replicas with the counter at 0 scale up, not to zero", metrics: MetricsAvailable,
			variants: one(nil), replicas: saturated, requests: &zero, want: 5, rule: decision.RuleScaleUp},
		{name: "missing counter with idle pods holds four", metrics: MetricsAvailable,
			variants: one(nil), replicas: idle, want: 4, rule: decision.RuleRequestCountMissing},
		{name: "gateway queue keeps an idle group", metrics: MetricsAvailable,
			variants: one(nil), replicas: idle, queue: 4, requests: &zero, want: 3},
		{name: "woken group without series yet stays at one", metrics: MetricsAbsent,
			variants: one(func(v *decision.Variant) {
				v.CurrentReplicas, v.DesiredReplicas, v.ScaledFromZeroAt = 1, 0, t0.Add(-30*time.Second)
			}), want: 1, rule: decision.RuleZeroBlocked},
		{name: "Ready pods without series hold four", metrics: MetricsMissing,
			variants: one(nil), want: 4, rule: decision.RuleMetricsMissing},
		{name: "no Ready pod and no series past retention goes to zero", metrics: MetricsAbsent,
			variants: one(nil), want: 0, rule: decision.RuleRetention},
		{name: "idle with evidence scales to zero", metrics: MetricsAvailable,
			variants: one(nil), replicas: idle, requests: &zero, want: 0, rule: decision.RuleScaleToZero},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := GroupInput{Config: cfg, Metrics: tc.metrics, RequestsInRetention: tc.requests,
				Group: decision.Group{ModelID: "m", Namespace: "ns", Variants: tc.variants, Replicas: tc.replicas, SchedulerQueueSize: tc.queue}}
			res := Default().Run(t0, []GroupInput{in})
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			got := res[0].Targets[0]
			assert.Equal(t, tc.want, got.Replicas, got.Reason)
			if tc.rule != "" {
				assert.Equal(t, tc.rule, got.Rule, got.Reason)
			}
		})
	}
}
