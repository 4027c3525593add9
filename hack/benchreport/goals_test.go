package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// runOf is a report of a run of the given length with wva's and the
// oracle's rows and wva's verdict.
func runOf(length time.Duration, wvaAtt, oracleAtt, toOracle float64, events int, dominated []string, over bool) sim.Report {
	return sim.Report{
		Stats: trace.Stats{Duration: length},
		SLO:   sim.SLOSummary{Attainment: 0.99},
		Policies: []sim.PolicySummary{
			{Policy: "wva", SLOAttainment: wvaAtt, CostToOracle: toOracle, ScaleEvents: events},
			{Policy: "oracle", SLOAttainment: oracleAtt, CostToOracle: 1},
		},
		Verdict: &sim.Verdict{DominatedBy: dominated, Overshoot: over},
	}
}

func TestGoals(t *testing.T) {
	rep := func(wvaAtt, oracleAtt, toOracle float64, events int, dominated []string, over bool) sim.Report {
		return runOf(2*time.Hour, wvaAtt, oracleAtt, toOracle, events, dominated, over)
	}
	for _, tc := range []struct {
		name                 string
		rep                  sim.Report
		smooth               bool
		goal                 float64
		attainment, cost, ok bool
	}{
		{"every goal", rep(0.975, 0.995, 1.4, 10, nil, false), false, 0.97, true, true, true},
		// The oracle's attainment under the SLO's sets the goal.
		{"an oracle short of the SLO", rep(0.94, 0.955, 1.2, 10, nil, false), false, 0.935, true, true, true},
		{"attainment short", rep(0.96, 0.995, 1.4, 10, nil, false), false, 0.97, false, true, false},
		{"cost over", rep(0.99, 0.995, 1.6, 10, nil, false), false, 0.97, true, false, false},
		{"dominated", rep(0.99, 0.995, 1.2, 10, []string{"kpa"}, false), false, 0.97, true, true, false},
		{"peak over its bound", rep(0.99, 0.995, 1.2, 10, nil, true), false, 0.97, true, true, false},
		// A smooth curve allows no attainment under the oracle's and 1.3x its cost.
		{"smooth, every goal", rep(0.992, 0.995, 1.25, 10, nil, false), true, 0.99, true, true, true},
		{"smooth, held as bursty", rep(0.975, 0.995, 1.4, 10, nil, false), true, 0.99, false, false, false},
		{"smooth, an oracle short of the SLO", rep(0.96, 0.965, 1.2, 10, nil, false), true, 0.965, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := goalOf(tc.rep, tc.smooth)
			require.True(t, ok)
			assert.InDelta(t, tc.goal, g.attainmentGoal, 1e-9)
			assert.Equal(t, tc.attainment, g.attainmentMet())
			assert.Equal(t, tc.cost, g.costMet())
			assert.Equal(t, tc.ok, g.met())
			assert.InDelta(t, 5, g.eventsPerHour, 1e-9, "10 events over 2 hours")
		})
	}
	_, ok := goalOf(sim.Report{Policies: []sim.PolicySummary{{Policy: "wva"}}}, false)
	assert.False(t, ok, "no oracle row, nothing to judge against")

	good, _ := goalOf(rep(0.975, 0.995, 1.4, 10, nil, false), false)
	busy, _ := goalOf(rep(0.96, 0.995, 1.4, 40, []string{"kpa", "oracle"}, false), false)
	table := goalsTable([]string{"calm", "busy"}, []goal{good, busy})
	assert.Contains(t, table, "| calm | 97.50% (goal 97.00%): met | 1.40 (goal 1.5): met | not dominated | within | 5.0 | met |\n")
	assert.Contains(t, table, "| busy | 96.00% (goal 97.00%): **not met** | 1.40 (goal 1.5): met | **dominated** by 2 rows | within | 20.0 | **not met** |\n")
	assert.Contains(t, table, "Every goal met on 1 of 2 workloads; 12.5 scale events per hour of trace on average, **over** the goal of 12.")
}

// TestGoalsOf judges each workload from the run the policy table takes of
// it: an hour-long workload over every policy's knob (--frontier), a long
// one once.
func TestGoalsOf(t *testing.T) {
	runs := map[string]sim.Report{
		"hour":  runOf(time.Hour, 0.995, 0.995, 1.2, 6, []string{}, false),
		"curve": runOf(time.Hour, 0.995, 0.995, 1.4, 6, []string{}, false),
		"day":   runOf(24*time.Hour, 0.95, 0.995, 1.6, 48, []string{"kpa"}, true),
	}
	var calls [][]string
	simulate := func(args ...string) ([]byte, error) {
		calls = append(calls, args)
		return json.Marshal(runs[args[len(args)-1]])
	}
	table, err := goalsOf(simulate, []workload{
		{Name: "an hour", Args: []string{"--shape", "hour"}},
		{Name: "a curve", Args: []string{"--shape", "curve"}, Smooth: true},
		{Name: "a day", Args: []string{"--shape", "day"}, Long: true},
	})
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.Equal(t, []string{"--json", "--frontier", "--shape", "hour"}, calls[0])
	assert.Equal(t, []string{"--json", "--frontier", "--shape", "curve"}, calls[1])
	assert.Equal(t, []string{"--json", "--shape", "day"}, calls[2])
	assert.Contains(t, table, "| an hour | 99.50% (goal 97.00%): met | 1.20 (goal 1.5): met | not dominated | within | 6.0 | met |\n")
	assert.Contains(t, table, "| a curve | 99.50% (goal 99.00%): met | 1.40 (goal 1.3): **not met** | not dominated | within | 6.0 | **not met** |\n")
	assert.Contains(t, table, "| a day | 95.00% (goal 97.00%): **not met** | 1.60 (goal 1.5): **not met** | **dominated** by 1 row | **over** | 2.0 | **not met** |\n")
	assert.Contains(t, table, "Every goal met on 1 of 3 workloads; 4.7 scale events per hour of trace on average, within the goal of 12.")
}
