package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

// --explain keeps one decision per engine interval, each with the
// planner's account and a target per variant within its bounds, and
// renders every line under the simulated time of its cycle; without it the
// report keeps none.
func TestRenderDecisions(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 15*time.Minute, 1.5, 5)
	rep, err := sim.Run(sc, tr, sim.Options{Policies: []string{policies.PolicyWVA, policies.PolicyKPA}, Explain: true})
	require.NoError(t, err)
	require.Greater(t, len(rep.Decisions), 10)
	interval := sc.Control.EngineInterval.D()
	// The cycles run on the timeline's clock: the first comes one metrics
	// window into the warm-up pre-roll, before the trace's start.
	assert.Equal(t, sc.Control.MetricsWindow.D()-sc.Control.Warmup.D(), rep.Decisions[0].At)
	var targets int
	for i, d := range rep.Decisions {
		if i > 0 {
			assert.Equal(t, interval, d.At-rep.Decisions[i-1].At, "cycle %d", i)
		}
		assert.Equal(t, rep.Analyzer, d.Analyzer)
		assert.NotEmpty(t, d.Summary, "the slo-planner accounts for its plan")
		require.Len(t, d.Targets, len(sc.Variants))
		for _, tg := range d.Targets {
			v := sc.Variants[sc.VariantIndex(tg.Variant)]
			assert.GreaterOrEqual(t, tg.Replicas, v.MinReplicas, "%s at %s", tg.Variant, d.At)
			assert.LessOrEqual(t, tg.Replicas, v.MaxReplicas, "%s at %s", tg.Variant, d.At)
		}
		targets += len(d.Targets)
	}

	var out bytes.Buffer
	require.NoError(t, RenderDecisions(&out, rep))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	times := map[string]bool{}
	for _, d := range rep.Decisions {
		times[clock(d.At)] = true
	}
	var heads, targetLines int
	for _, l := range lines {
		at, rest, _ := strings.Cut(l, " ")
		assert.True(t, times[at], "line led by a cycle's time: %q", l)
		switch {
		case strings.HasPrefix(rest, "  target "):
			targetLines++
		case !strings.HasPrefix(rest, " "):
			heads++
			assert.Contains(t, rest, sc.Namespace+"/"+sc.ModelID+" "+rep.Analyzer+": ")
		}
	}
	assert.Equal(t, len(rep.Decisions), heads)
	assert.Equal(t, targets, targetLines)

	quiet, err := sim.Run(sc, tr, sim.Options{Policies: []string{policies.PolicyWVA}})
	require.NoError(t, err)
	assert.Empty(t, quiet.Decisions)
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                  "00:00:00",
		90 * time.Second:                   "00:01:30",
		6*time.Hour + 20*time.Minute:       "06:20:00",
		30*time.Hour + 5*time.Second + 999: "30:00:05",
		-9 * time.Minute:                   "-00:09:00",
	} {
		assert.Equal(t, want, clock(d))
	}
}
