package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wva-project/wva/pkg/analyzer"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// countingAnalyzer remembers how many cycles it has seen, through the
// engine's state hand-off.
type countingAnalyzer struct{ seen []int }

func (c *countingAnalyzer) Name() string { return params.DefaultScaling().AnalyzerName }

func (c *countingAnalyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	return c.AnalyzeState(g, cfg, nil)
}

func (c *countingAnalyzer) AnalyzeState(_ decision.Group, _ params.Resolved, prev any) (analyzer.Result, error) {
	n, _ := prev.(int)
	c.seen = append(c.seen, n)
	return analyzer.Result{Signal: decision.Signal{Reason: "counting"}, State: n + 1}, nil
}

func TestAnalyzerStateCarriedAcrossCycles(t *testing.T) {
	counter := &countingAnalyzer{}
	p := decide.Default()
	// Under the name the built-in configuration selects.
	p.Analyzers = map[string]analyzer.Analyzer{counter.Name(): counter}
	writer := &fakeWriter{writes: map[string]llmdv1alpha1.VariantAutoscalingStatus{}}
	e := &Engine{Views: &fakeViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(1, "p1")}}},
		Metrics: &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.5, "p1")}}, Status: writer, Config: config.NewStore(),
		Pipeline: p, Clock: clocktesting.NewFakeClock(t0), Interval: time.Second, StatusHeartbeat: time.Minute}
	for range 3 {
		_, err := e.RunOnce(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, []int{0, 1, 2}, counter.seen)
}

// orderWriter records status writes in a shared log.
type orderWriter struct{ log *[]string }

func (w orderWriter) WriteStatus(_ context.Context, va *llmdv1alpha1.VariantAutoscaling, st llmdv1alpha1.VariantAutoscalingStatus) error {
	*w.log = append(*w.log, "status")
	va.Status = st
	return nil
}

// TestStateSavedBeforeStatuses: each cycle's new analyzer state is saved
// before its decisions are written, so a leader killed between the two
// leaves the state those decisions came from; a failing save does not hold
// the decisions back.
func TestStateSavedBeforeStatuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		saveErr error
	}{
		{"save succeeds", nil},
		{"save fails", assert.AnError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := &countingAnalyzer{}
			p := decide.Default()
			p.Analyzers = map[string]analyzer.Analyzer{counter.Name(): counter}
			var log []string
			var saved []int
			e := &Engine{Views: &fakeViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(1, "p1")}}},
				Metrics: &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.5, "p1")}}, Status: orderWriter{&log}, Config: config.NewStore(),
				Pipeline: p, Clock: clocktesting.NewFakeClock(t0), Interval: time.Second, StatusHeartbeat: time.Minute,
				SaveState: func(_ context.Context, state map[decide.GroupKey]any) error {
					log = append(log, "state")
					for _, v := range state {
						saved = append(saved, v.(int))
					}
					return tc.saveErr
				}}
			for range 2 {
				_, err := e.RunOnce(context.Background())
				require.NoError(t, err)
			}
			// The heartbeat is a minute: the second, unchanged decision is
			// not rewritten.
			assert.Equal(t, []string{"state", "status", "state"}, log)
			assert.Equal(t, []int{1, 2}, saved, "the state after each cycle, not the one before")
		})
	}
}
