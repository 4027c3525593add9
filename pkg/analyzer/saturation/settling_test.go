package saturation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// The e2e's scale-up: 2 replicas at KV 0.78 asked for a third; on 3 the
// load is 0.52 each, yet the first two still read their peak for a window.
func TestSettling(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 53, 17, 0, time.UTC)
	old := now.Add(-10 * time.Minute)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	ready := func(pod string, kv float64, readyAt time.Time) decision.ReplicaMetrics {
		r := rm(pod, "v", kv, 0)
		r.ReadyAt = readyAt
		return r
	}
	group := func(lastReady time.Time, replicas ...decision.ReplicaMetrics) decision.Group {
		return decision.Group{Now: now, Replicas: replicas,
			Variants: []decision.Variant{{Name: "v", MinReplicas: 1, MaxReplicas: 4, CurrentReplicas: 3, DesiredReplicas: 3, LastUpdate: at(22 * time.Second), StartupDelay: 8 * time.Second, LastReadyAt: lastReady}}}
	}
	cfg := params.Resolved{Scaling: params.DefaultScaling(), SLO: params.DefaultSLO()}
	cases := []struct {
		name     string
		g        decision.Group
		settling string // fragment; "" = the scale-up stands
		up       bool
	}{
		{"third replica Ready 14s ago at 0.53, the first two still read 0.79: no fourth",
			group(at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.53, at(14*time.Second))),
			"the replicas Ready within it (1) have headroom (avg spare KV 0.270", false},
		{"the new replica is short of headroom too: load still rising, scale up",
			group(at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.72, at(14*time.Second))),
			"", true},
		{"the new replica saturated: scale up",
			group(at(14*time.Second), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.85, at(14*time.Second))),
			"", true},
		{"Ready a window ago: every reading is after it, the scale-up stands",
			group(at(time.Minute), ready("a", 0.79, old), ready("b", 0.79, old), ready("c", 0.53, at(time.Minute))),
			"", true},
		{"Ready but not reported yet, the variant stuck in transition: no fourth on the old readings",
			group(at(14*time.Second), ready("a", 0.78, old), ready("b", 0.78, old)),
			"no replica Ready since reports metrics yet", false},
		{"Ready times unknown: the seed's verdict",
			group(time.Time{}, ready("a", 0.79, time.Time{}), ready("b", 0.79, time.Time{}), ready("c", 0.53, time.Time{})),
			"", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, sig := Analyzer{}.analyze(tc.g, cfg)
			assert.Contains(t, a.Settling, tc.settling)
			assert.Equal(t, tc.settling == "", a.Settling == "", a.Settling)
			assert.Equal(t, tc.up, sig.RequiredCapacity == 1, sig.Reason)
			assert.False(t, sig.Hold)
			assert.Zero(t, sig.SpareCapacity)
		})
	}
}

// Settling never turns a scale-down or a steady verdict into anything else.
func TestSettlingOnlyWithholdsScaleUps(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 53, 17, 0, time.UTC)
	cfg := params.Resolved{Scaling: params.DefaultScaling(), SLO: params.DefaultSLO()}
	group := func(kv float64, readyAt time.Time) decision.Group {
		g := decision.Group{Now: now, Variants: []decision.Variant{{Name: "v", MinReplicas: 1, MaxReplicas: 4, CurrentReplicas: 3, DesiredReplicas: 3, LastReadyAt: readyAt}}}
		for _, p := range []string{"a", "b", "c"} {
			r := rm(p, "v", kv, 0)
			r.ReadyAt = readyAt
			g.Replicas = append(g.Replicas, r)
		}
		return g
	}
	for _, kv := range []float64{0.1, 0.5} {
		a, sig := Analyzer{}.analyze(group(kv, now.Add(-5*time.Second)), cfg)
		_, want := Analyzer{}.analyze(group(kv, time.Time{}), cfg)
		assert.Empty(t, a.Settling)
		assert.Equal(t, want, sig, "kv %v", kv)
	}
}
