package integration

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wva-project/wva/pkg/adapter"
	"github.com/wva-project/wva/pkg/analyzer/planner"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/engine"
)

// scheduledGateway reports the gateway arrival rate rateAt gives for the
// time since start on its clock, and one replica serving it.
type scheduledGateway struct {
	mu     sync.Mutex
	clock  *clocktesting.FakeClock
	start  time.Time
	rateAt func(time.Duration) float64
}

// burstyRate is 2 req/s with a 3x burst for the last three minutes of
// every quarter hour.
func burstyRate(d time.Duration) float64 {
	if m := int(d.Minutes()); m%15 >= 12 {
		return 6
	}
	return 2
}

// workdayRate is 1 req/s at night and 5 req/s from 09:00 to 17:00.
func workdayRate(d time.Duration) float64 {
	if h := math.Mod(d.Hours(), 24); h >= 9 && h < 17 {
		return 5
	}
	return 1
}

// weekRate is workdayRate on workdays and the night's rate on weekends;
// the rig's day 0 (2026-01-01) is a Thursday.
func weekRate(d time.Duration) float64 {
	if wd := (time.Thursday + time.Weekday(int(d.Hours()/24))) % 7; wd == time.Saturday || wd == time.Sunday {
		return 1
	}
	return workdayRate(d)
}

func (b *scheduledGateway) Collect(context.Context, collector.Request) (collector.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rate := b.rateAt(b.clock.Since(b.start))
	return collector.Result{
		Pods: map[collector.PodKey]collector.PodMetrics{{Namespace: "prod", Pod: "p1"}: {
			KvCacheUsage: 0.3, HasKvCacheUsage: true, HasQueueLength: true, NumGPUBlocks: 4096, BlockSize: 16,
			AvgInputTokens: 800, AvgOutputTokens: 200, ArrivalRate: rate, AvgITLms: 30, AvgTTFTms: 200}},
		GatewayArrivals: map[collector.ModelKey]float64{{Namespace: "prod", Model: "meta/llama-3.1-8b"}: rate},
	}, nil
}

// plannerRig is one group on an API server whose gateway rate follows
// rateAt on a fake clock from 2026-01-01 00:00 UTC, and engines on the
// built-in configuration (the slo-planner) that persist their state there
// and cycle every interval.
type plannerRig struct {
	t     *testing.T
	ctx   context.Context
	clk   *clocktesting.FakeClock
	start time.Time
	// newEngine is a new leader: Load restores the persisted state.
	newEngine func() (*engine.Engine, *adapter.StatePersister)
}

func newPlannerRig(ctx context.Context, t *testing.T, rateAt func(time.Duration) float64, interval time.Duration) plannerRig {
	cs, wva, lister := stateCluster(ctx, t, 20)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	gateway := &scheduledGateway{clock: clk, start: start, rateAt: rateAt}
	return plannerRig{t: t, ctx: ctx, clk: clk, start: start, newEngine: func() (*engine.Engine, *adapter.StatePersister) {
		e := &engine.Engine{Views: apiViews{ctx, wva}, Metrics: gateway, Status: engine.ClientStatusWriter{Client: wva},
			Config: config.NewStore(), Pipeline: decide.Default(), Clock: clk, Interval: interval, StatusHeartbeat: interval}
		return e, &adapter.StatePersister{Kube: cs, Namespace: "wva-system", Engine: e, Lister: lister}
	}}
}

// plan runs one cycle of e and returns the planner's analysis, the
// replicas it decided for the group and the reason given.
func (r plannerRig) plan(e *engine.Engine) (planner.Analysis, int32, string) {
	c, err := e.RunOnce(r.ctx)
	require.NoError(r.t, err)
	require.Len(r.t, c.Results, 1)
	require.NoError(r.t, c.Results[0].Err)
	an, ok := c.Results[0].Analysis.(planner.Analysis)
	require.True(r.t, ok, "the slo-planner decided: %T", c.Results[0].Analysis)
	var desired int32
	var reason string
	for _, tg := range c.Results[0].Targets {
		desired += tg.Replicas
		reason = tg.Reason
	}
	return an, desired, reason
}

// TestPlannerRiseMarginSurvivesLeaderChange: the slo-planner's rise margin
// is learned from the group's own history, which lives in its persisted
// state. Engine A plans a group through three hours of bursts (a fake
// clock, a cycle a minute) and saves its state; a new leader B loads it
// from the API server and plans the lull after with the margin A learned,
// as A itself does next, where a cold engine at the same rate plans none.
func TestPlannerRiseMarginSurvivesLeaderChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newPlannerRig(ctx, t, burstyRate, time.Minute)

	a, pa := r.newEngine()
	require.NoError(t, pa.Load(ctx))
	// Three hours and five minutes: the last cycles are a lull.
	for range 185 {
		r.plan(a)
		r.clk.Step(time.Minute)
	}
	require.NoError(t, pa.Persist(ctx))

	b, pb := r.newEngine()
	require.NoError(t, pb.Load(ctx))
	fromB, _, _ := r.plan(b)
	assert.Equal(t, 2.0, fromB.ArrivalRate, "a lull")
	assert.Greater(t, fromB.RiseMargin, 2.0, "B plans the usual burst's rise A learned")

	fromA, _, _ := r.plan(a)
	assert.InDelta(t, fromA.RiseMargin, fromB.RiseMargin, 1e-9, "as A does from its own memory")

	cold, _ := r.newEngine()
	fromCold, _, _ := r.plan(cold)
	assert.Zero(t, fromCold.RiseMargin, "a cold engine has no history")
}

// TestPlannerProfileSurvivesLeaderChange: the slo-planner's daily profile
// is learned from the group's own days and lives in its persisted state.
// Engine A plans a group through a workday and the night after (a fake
// clock, a cycle every ten minutes) and saves its state; at 08:55 the
// next morning a new leader B loads it from the API server and orders the
// 09:00 rise A learned before it comes, as A itself does next, where a
// cold engine at the same rate orders nothing.
func TestPlannerProfileSurvivesLeaderChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newPlannerRig(ctx, t, workdayRate, 10*time.Minute)

	// From midnight to 08:50 the next day; the new leader takes over at
	// 08:55, one start-up delay (5 min by default) before the rise.
	desiredB := r.handOverBeforeRise(32*time.Hour+50*time.Minute, "the 09:00 rise A learned")

	cold, _ := r.newEngine()
	fromCold, desiredCold, _ := r.plan(cold)
	assert.Zero(t, fromCold.ProfileRise, "a cold engine has no day behind it")
	assert.Greater(t, desiredB, desiredCold, "the rise ordered is replicas ordered")
}

// TestPlannerWeeklyProfileSurvivesLeaderChange: after a week, the Monday
// after a weekend orders the rise the Monday before had. The weekend's
// days have none, so the new leader orders it only from the profile it
// loads, not from the days just before.
func TestPlannerWeeklyProfileSurvivesLeaderChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newPlannerRig(ctx, t, weekRate, 10*time.Minute)

	// From Thursday 2026-01-01 to 08:50 on Monday 2026-01-12: a Monday, a
	// weekend and a Monday again.
	monday := 11 * 24 * time.Hour
	require.Equal(t, time.Monday, r.start.Add(monday).Weekday())
	r.handOverBeforeRise(monday+8*time.Hour+50*time.Minute, "the rise of the Monday a week before")
}

// handOverBeforeRise runs leader A in 10 minute cycles until `until` into
// the rig's days, persists its state, and 5 minutes later (one start-up
// before a 09:00 rise of 1 -> 5 req/s) has leader B load it and plan. B
// must order the rise (what says where from) as A does from its own
// memory; it returns B's desired replicas.
func (r plannerRig) handOverBeforeRise(until time.Duration, what string) int32 {
	t := r.t
	a, pa := r.newEngine()
	require.NoError(t, pa.Load(r.ctx))
	for r.clk.Since(r.start) < until {
		r.plan(a)
		r.clk.Step(10 * time.Minute)
	}
	require.NoError(t, pa.Persist(r.ctx))
	r.clk.Step(5 * time.Minute)

	b, pb := r.newEngine()
	require.NoError(t, pb.Load(r.ctx))
	fromB, desiredB, reasonB := r.plan(b)
	assert.Equal(t, 1.0, fromB.ArrivalRate, "still the night's rate")
	assert.InDelta(t, 4.0, fromB.ProfileRise, 1e-9, "B orders %s", what)
	assert.Contains(t, reasonB, "the past days rose by 4.00 req/s")

	fromA, desiredA, _ := r.plan(a)
	assert.InDelta(t, fromB.ProfileRise, fromA.ProfileRise, 1e-9, "as A does from its own memory")
	assert.Equal(t, desiredA, desiredB)
	return desiredB
}
