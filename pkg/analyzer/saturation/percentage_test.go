package saturation

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func rm(pod, variant string, kv, queue float64) decision.ReplicaMetrics {
	return decision.ReplicaMetrics{Pod: pod, Variant: variant, KvCacheUsage: kv, QueueLength: queue}
}

func TestIsSaturated(t *testing.T) {
	cfg := params.DefaultScaling()
	cases := []struct {
		name      string
		kv, queue float64
		want      bool
	}{
		{"idle", 0, 0, false},
		{"kv just below", 0.7999, 4, false},
		{"kv at threshold", 0.80, 0, true},
		{"queue at threshold", 0.1, 5, true},
		{"both over", 0.95, 9, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, IsSaturated(rm("p", "v", tc.kv, tc.queue), cfg))
		})
	}
}

func TestAnalyzeReplicas(t *testing.T) {
	cfg := params.DefaultScaling() // 0.80 / 5 / 0.10 / 3
	cases := []struct {
		name         string
		replicas     []decision.ReplicaMetrics
		cfg          params.Scaling
		nonSat       int
		spareKv      float64
		spareQueue   float64
		up, downSafe bool
		whyFragment  string
	}{
		{
			// The design notes' multi-variant example: 5 replicas across two
			// variants, none saturated, headroom fine, but removing one of 5
			// would leave KV spare -0.0125 < 0.10.
			name: "seed multi-variant example",
			replicas: []decision.ReplicaMetrics{
				rm("v1-1", "variant-1", 0.70, 2), rm("v1-2", "variant-1", 0.75, 3),
				rm("v2-1", "variant-2", 0.60, 1), rm("v2-2", "variant-2", 0.65, 2), rm("v2-3", "variant-2", 0.55, 1),
			},
			cfg: cfg, nonSat: 5, spareKv: 0.15, spareQueue: 3.2, whyFragment: "scale-down unsafe",
		},
		{
			name:     "kv spare below trigger",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.75, 0), rm("b", "v", 0.74, 0)},
			cfg:      cfg, nonSat: 2, spareKv: 0.055, spareQueue: 5, up: true, whyFragment: "avg spare KV 0.055 < trigger 0.100",
		},
		{
			name:     "kv spare exactly at trigger does not scale up",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.7, 0), rm("b", "v", 0.7, 0)},
			cfg:      cfg, nonSat: 2, spareKv: 0.1, spareQueue: 5, whyFragment: "scale-down unsafe",
		},
		{
			name:     "queue spare below trigger",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.1, 3), rm("b", "v", 0.1, 4)},
			cfg:      cfg, nonSat: 2, spareKv: 0.7, spareQueue: 1.5, up: true, whyFragment: "avg spare queue 1.50 < trigger 3.00",
		},
		{
			name:     "saturated replicas are excluded from averages",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.95, 0), rm("b", "v", 0.2, 1), rm("c", "v", 0.1, 9)},
			cfg:      cfg, nonSat: 1, spareKv: 0.6, spareQueue: 4, whyFragment: "needs >= 2 non-saturated",
		},
		{
			name:     "all saturated means scale up",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.9, 0), rm("b", "v", 0.2, 7)},
			cfg:      cfg, nonSat: 0, up: true, whyFragment: "all 2 replicas saturated",
		},
		{
			name: "no replica reporting means scale up",
			cfg:  cfg, up: true, whyFragment: "no replica reporting metrics",
		},
		{
			// avg load 0.2 kv, 1 queue over 4 replicas; after removal
			// 0.2*4/3=0.267 -> spare 0.533; queue 1.333 -> spare 3.667.
			name: "scale-down safe with light load",
			replicas: []decision.ReplicaMetrics{
				rm("a", "v", 0.2, 1), rm("b", "v", 0.2, 1), rm("c", "v", 0.2, 1), rm("d", "v", 0.2, 1),
			},
			cfg: cfg, nonSat: 4, spareKv: 0.6, spareQueue: 4, downSafe: true, whyFragment: "removing one of 4",
		},
		{
			// Two replicas at load 0.35: after removal 0.7 -> spare 0.10,
			// exactly the trigger: safe (>=).
			name:     "scale-down boundary is inclusive",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.35, 0), rm("b", "v", 0.35, 0)},
			cfg:      cfg, nonSat: 2, spareKv: 0.45, spareQueue: 5, downSafe: true,
		},
		{
			name:     "scale-down unsafe on queue",
			replicas: []decision.ReplicaMetrics{rm("a", "v", 0.1, 1), rm("b", "v", 0.1, 1.5)},
			cfg:      cfg, nonSat: 2, spareKv: 0.7, spareQueue: 3.75, whyFragment: "queue 2.50 (trigger 3.00)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := AnalyzeReplicas(tc.replicas, tc.cfg)
			assert.Equal(t, len(tc.replicas), a.TotalReplicas)
			assert.Equal(t, tc.nonSat, a.NonSaturated)
			assert.InDelta(t, tc.spareKv, a.AvgSpareKv, 1e-9)
			assert.InDelta(t, tc.spareQueue, a.AvgSpareQueue, 1e-9)
			assert.Equal(t, tc.up, a.ShouldScaleUp, a.Why)
			assert.Equal(t, tc.downSafe, a.ScaleDownSafe, a.Why)
			assert.Contains(t, a.Why, tc.whyFragment)
			assert.False(t, a.ShouldScaleUp && a.ScaleDownSafe, "never both")
		})
	}
}

func variant(name string, cost float64, current, desired int32) decision.Variant {
	return decision.Variant{Name: name, Cost: cost, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: current, DesiredReplicas: desired}
}

func TestTransition(t *testing.T) {
	cases := []struct {
		name     string
		group    decision.Group
		want     bool
		held     map[string]int32
		fragment string
	}{
		{
			name: "stable: metrics == current, desired 0",
			group: decision.Group{
				Variants: []decision.Variant{variant("v1-l4", 5, 2, 0), variant("v2-a100", 20, 2, 0)},
				Replicas: []decision.ReplicaMetrics{rm("a", "v1-l4", .5, 0), rm("b", "v1-l4", .5, 0), rm("c", "v2-a100", .5, 0), rm("d", "v2-a100", .5, 0)},
			},
			held: map[string]int32{"v1-l4": 2, "v2-a100": 2},
		},
		{
			name: "stable: desired == current",
			group: decision.Group{
				Variants: []decision.Variant{variant("v1-l4", 5, 2, 2)},
				Replicas: []decision.ReplicaMetrics{rm("a", "v1-l4", .5, 0), rm("b", "v1-l4", .5, 0)},
			},
			held: map[string]int32{"v1-l4": 2},
		},
		{
			// Seed example: v2-a100 current 4, 3 reporting -> the whole model holds.
			name: "seed transition example: metrics != current",
			group: decision.Group{
				Variants: []decision.Variant{variant("v1-l4", 5, 2, 0), variant("v2-a100", 20, 4, 0)},
				Replicas: []decision.ReplicaMetrics{
					rm("a", "v1-l4", .79, 0), rm("b", "v1-l4", .79, 0),
					rm("c", "v2-a100", .79, 0), rm("d", "v2-a100", .79, 0), rm("e", "v2-a100", .79, 0),
				},
			},
			want: true, held: map[string]int32{"v1-l4": 2, "v2-a100": 4}, fragment: "v2-a100 has 3 of 4 replicas reporting",
		},
		{
			name: "desired != current keeps desired",
			group: decision.Group{
				Variants: []decision.Variant{variant("v1-l4", 5, 2, 3), variant("v2-a100", 20, 2, 0)},
				Replicas: []decision.ReplicaMetrics{rm("a", "v1-l4", .5, 0), rm("b", "v1-l4", .5, 0), rm("c", "v2-a100", .5, 0), rm("d", "v2-a100", .5, 0)},
			},
			want: true, held: map[string]int32{"v1-l4": 3, "v2-a100": 2}, fragment: "v1-l4 desired 3 != current 2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, held, why := Transition(tc.group)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.held, held)
			assert.Contains(t, why, tc.fragment)
		})
	}
}

func TestAnalyzerSignal(t *testing.T) {
	cfg := params.Resolved{Scaling: params.DefaultScaling(), SLO: params.DefaultSLO()}
	group := func(kv float64) decision.Group {
		return decision.Group{
			Variants: []decision.Variant{variant("v", 5, 3, 0)},
			Replicas: []decision.ReplicaMetrics{rm("a", "v", kv, 0), rm("b", "v", kv, 0), rm("c", "v", kv, 0)},
		}
	}
	cases := []struct {
		name            string
		group           decision.Group
		required, spare float64
		hold            bool
	}{
		{"saturated asks for one replica", group(0.78), 1, 0, false},
		{"light load offers one replica", group(0.1), 0, 1, false},
		{"middle holds steady", group(0.55), 0, 0, false},
		{"transition holds", func() decision.Group { g := group(0.78); g.Replicas = g.Replicas[:2]; return g }(), 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Analyzer{}.Analyze(tc.group, cfg)
			require.NoError(t, err)
			assert.Equal(t, tc.required, res.Signal.RequiredCapacity)
			assert.Equal(t, tc.spare, res.Signal.SpareCapacity)
			assert.Equal(t, tc.hold, res.Signal.Hold)
			assert.NotEmpty(t, res.Signal.Reason)
			_, ok := res.Details.(Analysis)
			assert.True(t, ok)
		})
	}
}

// A variant in transition for longer than twice its start-up no longer
// blocks the group: a pod that never turns Ready (an unschedulable H100)
// must not freeze the cheap variant's scale-up. An ordinary transition
// still holds the whole model.
func TestStuckTransitionStopsBlocking(t *testing.T) {
	now := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	saturated := []decision.ReplicaMetrics{rm("a", "v1-l4", .95, 8), rm("b", "v1-l4", .95, 8)}
	h100 := func(since time.Duration, startup time.Duration) decision.Variant {
		v := variant("v2-h100", 20, 1, 1)
		v.PendingReplicas = 1 // the one pod never turned Ready: 0 of 1 reporting
		v.LastUpdate = now.Add(-since)
		v.StartupDelay = startup
		return v
	}
	cases := []struct {
		name     string
		h100     decision.Variant
		now      time.Time
		hold     bool
		fragment string
	}{
		{"pending for six hours: not blocking", h100(6*time.Hour, 0), now, false, "v2-h100 in transition for 6h0m0s > 20m0s: not blocking"},
		{"past twice the measured start-up", h100(9*time.Minute, 4*time.Minute), now, false, "> 8m0s: not blocking"},
		{"an ordinary transition still holds", h100(5*time.Minute, 4*time.Minute), now, true, "v2-h100 has 0 of 1 replicas reporting"},
		{"no clock: upstream's blocking", h100(6*time.Hour, 0), time.Time{}, true, "v2-h100 has 0 of 1 replicas reporting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := decision.Group{Now: tc.now, Replicas: saturated,
				Variants: []decision.Variant{variant("v1-l4", 5, 2, 2), tc.h100}}
			res, err := Analyzer{}.Analyze(g, params.Resolved{Scaling: params.DefaultScaling(), SLO: params.DefaultSLO()})
			require.NoError(t, err)
			assert.Equal(t, tc.hold, res.Signal.Hold, res.Signal.Reason)
			assert.Contains(t, res.Signal.Reason, tc.fragment)
			stuck := res.Details.(Analysis).Stuck
			if !tc.hold {
				assert.Positive(t, res.Signal.RequiredCapacity, "the saturated L4s ask for capacity")
				// The engine reads the stuck variant from the analysis.
				require.Len(t, stuck, 1)
				assert.Equal(t, Stuck{Variant: "v2-h100", Since: tc.h100.LastUpdate, For: params.Duration(now.Sub(tc.h100.LastUpdate)), Bound: params.Duration(StuckAfter(tc.h100)),
					Desired: 1, Current: 1, Reporting: 0, Pending: 1}, stuck[0])
				assert.Contains(t, stuck[0].Message(), "v2-h100 in transition since "+tc.h100.LastUpdate.Format(time.RFC3339))
			} else {
				assert.Empty(t, stuck, "an ordinary transition is not stuck")
			}
		})
	}
}

// TestStuckAfterSaturates: twice a huge start-up must not wrap negative
// (every transition would then count as stuck at once).
func TestStuckAfterSaturates(t *testing.T) {
	const top = time.Duration(math.MaxInt64)
	cases := []struct {
		name string
		v    decision.Variant
		want time.Duration
	}{
		{"measured start-up", decision.Variant{StartupDelay: 4 * time.Minute}, 8 * time.Minute},
		{"allowance", decision.Variant{StartupAllowance: 5 * time.Minute}, 10 * time.Minute},
		{"default", decision.Variant{}, 2 * DefaultStartup},
		{"huge measured start-up", decision.Variant{StartupDelay: top/2 + 1}, top},
		{"huge allowance", decision.Variant{StartupAllowance: top}, top},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, StuckAfter(tc.v))
		})
	}
	now := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	v := decision.Variant{StartupAllowance: top, LastUpdate: now.Add(-time.Minute)}
	assert.False(t, stuck(v, now), "a minute-old transition is not stuck")
}
