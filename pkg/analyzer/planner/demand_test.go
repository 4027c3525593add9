package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// TestZ checks the normal quantile against published values.
func TestZ(t *testing.T) {
	for _, tc := range []struct{ p, want, delta float64 }{
		{0.5, 0, 1e-12},
		{0.9, 1.28155, 1e-5},
		{0.95, 1.64485, 1e-5},
		{0.975, 1.95996, 1e-5},
		{0.99, 2.32635, 1e-5},
		{0.999, 3.09023, 1e-5},
		{0.9999, 3.71902, 1e-5},
		{0.01, -2.32635, 1e-5},
	} {
		assert.InDelta(t, tc.want, z(tc.p), tc.delta, "z(%g)", tc.p)
	}
}

// Backlog is demand to drain within a start-up delay.
func TestBacklogAddsDemand(t *testing.T) {
	g := fleet(2, 0, 2)
	a, _, _ := run(t, g, nil)
	g.SchedulerQueueSize = 360
	b, _, _ := run(t, g, nil)
	assert.InDelta(t, 360/120.0, b.BacklogRate, 1e-9, "360 requests over the L4s' 2m start-up (the H100 holds no replica)")
	assert.Greater(t, b.Staffed, a.Staffed)
}

// Without the gateway's counter, demand falls back to what the replicas
// complete.
func TestDemandSource(t *testing.T) {
	g := fleet(2, 0, 4)
	g.GatewayArrivalsReported = false
	a, _, _ := run(t, g, nil)
	assert.Equal(t, "replica completions", a.ArrivalSource)
	assert.InDelta(t, 4, a.ArrivalRate, 1e-9)
}

// The horizon is the start-up of the variants holding replicas; a
// variant's measured start-up is kept while it has no Ready pod.
func TestStartupHorizon(t *testing.T) {
	slo := params.DefaultSLO()
	v := func(name string, current int32, measured time.Duration) decision.Variant {
		return decision.Variant{Name: name, MaxReplicas: 4, CurrentReplicas: current, StartupDelay: measured}
	}
	cases := []struct {
		name     string
		variants []decision.Variant
		learned  map[string]VariantState
		want     time.Duration
	}{
		{"only holding variants count", []decision.Variant{v("l4", 2, 2*time.Minute), v("h100", 0, 0)}, nil, 2 * time.Minute},
		{"the longest holding one", []decision.Variant{v("l4", 2, 2*time.Minute), v("h100", 1, 3*time.Minute)}, nil, 3 * time.Minute},
		{"none holding: all, unmeasured at the fallback", []decision.Variant{v("l4", 0, 0), v("h100", 0, 0)}, nil, slo.StartupDelay.D()},
		{"a remembered measurement beats the fallback", []decision.Variant{v("l4", 0, 0)},
			map[string]VariantState{"l4": {StartupDelay: 90 * time.Second}}, 90 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, startupHorizon(tc.variants, tc.learned, slo))
		})
	}
	// learn remembers the last measurement for a variant at zero.
	g := fleet(2, 0, 2)
	_, _, st := run(t, g, nil)
	g.Variants[0].StartupDelay = 0
	g.Now = t0.Add(time.Minute)
	an, _, _ := run(t, g, st)
	assert.Equal(t, "2m0s", an.Variants[1].StartupDelay, "%+v", an.Variants[1])
}

func TestLoadRate(t *testing.T) {
	w := decision.RateWindow
	plans := []PlanPoint{
		{At: t0.Add(-4 * w), Arrivals: 4},
		{At: t0.Add(-3 * w), Arrivals: 1},
		{At: t0.Add(-2 * w), Arrivals: 1},
		{At: t0.Add(-w), Arrivals: 1},
	}
	for _, tc := range []struct {
		name string
		span time.Duration
		want float64
	}{
		{"a request within one window is the window's rate", w, 3},
		{"shorter still", w / 3, 3},
		{"two windows", 2 * w, (3 + 1) / 2.0},
		{"four windows", 4 * w, (3 + 1 + 1 + 1) / 4.0},
		{"five windows reach the older burst", 5 * w, (3 + 1 + 1 + 1 + 4) / 5.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, loadRate(plans, t0, 3, tc.span), 1e-9)
		})
	}
}

// A window's burst of requests that last minutes is planned at the rate
// the requests in flight arrived at; one of requests that last seconds at
// the window's rate.
func TestLongRequestsPlanTheirInFlightRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		outTokens float64
		smoothed  bool
	}{
		{"reasoning answers", 4000, true},
		{"chat answers", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			g := fleet(4, 0, 1)
			for i := range g.Replicas {
				g.Replicas[i].AvgOutputTokens = tc.outTokens
			}
			for range 10 {
				_, _, st = run(t, g, st)
				g.Now = g.Now.Add(decision.RateWindow)
			}
			g.GatewayArrivalRate = 3
			a, _, _ := run(t, g, st)
			b, _, _ := run(t, g, nil)
			assert.InDelta(t, 3, a.ArrivalRate, 1e-9)
			if tc.smoothed {
				assert.Less(t, a.LoadRate, 2.5, "one window at 3 req/s after minutes at 1")
				assert.Greater(t, a.LoadRate, 1.0)
				assert.Less(t, a.Staffed, b.Staffed, "planned below the window's rate")
			} else {
				assert.InDelta(t, 3, a.LoadRate, 1e-9)
			}
		})
	}
}

// A variant at the fair price ties its reference on cost per unit of
// rate: the first variant stays the reference rather than whichever
// rounds lower, so the margin's request time does not flip with the rate.
func TestReferenceCapacityTies(t *testing.T) {
	variants := []decision.Variant{{Name: "h100", Cost: 15, MaxReplicas: 8}, {Name: "l4", Cost: 5, MaxReplicas: 20}}
	for r := 1.0; r < 10; r += 0.01 {
		l4 := ReplicaCapacity{Rate: r, RequestSeconds: 6}
		h100 := ReplicaCapacity{Rate: r / 5 * 15, RequestSeconds: 18}
		got := referenceCapacity(variants, map[string]ReplicaCapacity{"l4": l4, "h100": h100})
		require.Equal(t, h100, got, "rate %.2f", r)
	}
	// A cheaper unit still wins.
	got := referenceCapacity(variants, map[string]ReplicaCapacity{"l4": {Rate: 2}, "h100": {Rate: 5.9}})
	assert.InDelta(t, 2.0, got.Rate, 1e-9)
}
