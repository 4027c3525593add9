package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
)

// countingViews counts cycles; gate, when set, holds each cycle until it
// receives (a stalled engine).
type countingViews struct {
	views  []decide.View
	cycles atomic.Int32
	gate   chan struct{}
}

func (f *countingViews) Views() ([]decide.View, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.cycles.Add(1)
	return f.views, nil
}

func testEngine(views ViewSource, clk *clocktesting.FakeClock) *Engine {
	return &Engine{Views: views,
		Metrics: &fakeMetrics{res: collector.Result{Queries: 6, Pods: pods("prod", 0.5, "p1", "p2")}},
		Status:  &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}, Config: config.NewStore(), Pipeline: decide.Default(),
		Recorder: record.NewFakeRecorder(100), Observe: NewMetrics(prometheus.NewRegistry()), Clock: clk,
		Interval: time.Hour, CycleTimeout: time.Minute, StatusHeartbeat: 2 * time.Minute}
}

// TestTriggerConcurrentWithRun: informer handlers call Trigger from their
// own goroutines while Run runs; under -race this caught the channel being
// created lazily without a lock. Triggers must not block and must wake Run.
func TestTriggerConcurrentWithRun(t *testing.T) {
	views := &countingViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(2, "p1", "p2")}}}
	e := testEngine(views, clocktesting.NewFakeClock(t0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for j := 0; j < 50; j++ {
				e.Trigger()
			}
		}()
	}
	go func() { e.Run(ctx); close(done) }()
	// Triggers sent before Run starts are answered by its first cycle
	// (TestTriggerBeforeRunIsAnsweredByTheFirstCycle): these go while it runs.
	require.Eventually(t, func() bool { return views.cycles.Load() >= 1 }, 5*time.Second, time.Millisecond)
	close(start)
	triggered := make(chan struct{})
	go func() { wg.Wait(); close(triggered) }()
	select {
	case <-triggered:
	case <-time.After(5 * time.Second):
		t.Fatal("Trigger blocked")
	}
	// Interval is an hour: any cycle after the first came from a trigger.
	require.Eventually(t, func() bool { return views.cycles.Load() >= 2 }, 5*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	// 1,600 triggers coalesce: each wake-up waits 200ms for the burst to settle.
	assert.Less(t, views.cycles.Load(), int32(30), "triggers coalesce")
}

// TestTriggerBeforeRunIsAnsweredByTheFirstCycle: a replica that is not
// leading still receives informer events and triggers; when it becomes
// the leader, its first cycle answers them, not a second one 200ms later
// (which made a new leader decide twice at once).
func TestTriggerBeforeRunIsAnsweredByTheFirstCycle(t *testing.T) {
	views := &countingViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(2, "p1", "p2")}}}
	e := testEngine(views, clocktesting.NewFakeClock(t0))
	e.Trigger() // while following
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return views.cycles.Load() >= 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(time.Second) // a stale trigger would run a second cycle after 200ms
	assert.Equal(t, int32(1), views.cycles.Load(), "one cycle on taking over (Interval is an hour)")
	// A trigger while leading still wakes it.
	e.Trigger()
	require.Eventually(t, func() bool { return views.cycles.Load() == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
}

// TestLive: the engine's loop is live while cycles keep ending within the
// bound; a stalled cycle makes it fail once the bound passes, and an engine
// not running (a replica that is not the leader) is live.
func TestLive(t *testing.T) {
	const bound = 3 * time.Minute
	clk := clocktesting.NewFakeClock(t0)
	views := &countingViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(2, "p1", "p2")}}, gate: make(chan struct{})}
	e := testEngine(views, clk)

	clk.Step(time.Hour)
	require.NoError(t, e.Live(bound), "not running: live")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return e.runSince.Load() != 0 }, 5*time.Second, time.Millisecond)

	// The first cycle is stuck (views gate closed).
	clk.Step(bound)
	assert.NoError(t, e.Live(bound), "exactly the bound since Run started")
	clk.Step(time.Second)
	assert.EqualError(t, e.Live(bound), "engine: no cycle completed in the 3m1s since it started, bound 3m0s")

	// It completes: live again, measured from its end.
	views.gate <- struct{}{}
	require.Eventually(t, func() bool { return e.Live(bound) == nil }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(1), views.cycles.Load())

	// The next cycle (triggered) stalls past the bound.
	e.Trigger()
	clk.Step(5 * time.Minute)
	assert.EqualError(t, e.Live(bound), "engine: last cycle 5m0s ago, bound 3m0s")

	// A cycle ending in an error still counts: restarting cures no outage.
	e.Metrics = &fakeMetrics{err: errors.New("prometheus down")}
	views.gate <- struct{}{}
	require.Eventually(t, func() bool { return e.Live(bound) == nil }, 5*time.Second, time.Millisecond)

	cancel()
	close(views.gate) // let a cycle the cancel raced with end
	<-done
	clk.Step(time.Hour)
	assert.NoError(t, e.Live(bound), "stopped leading: live")
}
