package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/sim"
	simpolicies "github.com/wva-project/wva/pkg/sim/policies"
)

// The planner's goals (one configuration for every workload), read off the
// policy runs. A workload with bursts (every benchmark workload) is held to
// attainment at least the lesser of the SLO's and the oracle's less
// attainmentAllowance and cost at most costBound times the oracle's; a
// smooth one (workloads.Workload.Smooth) to the lesser of the SLO's and
// the oracle's attainment and smoothCostBound; and on all of them
// together, at most eventsGoal scale events per hour of trace on average.
const (
	attainmentAllowance = 0.02
	costBound           = 1.5
	smoothCostBound     = 1.3
	eventsGoal          = 12.0
)

// goal is wva's standing against the goals on one workload.
type goal struct {
	attainment, attainmentGoal float64
	costToOracle, costGoal     float64
	eventsPerHour              float64
	dominatedBy                []string
	peakOver                   bool
}

func (g goal) attainmentMet() bool { return g.attainment+1e-9 >= g.attainmentGoal }
func (g goal) costMet() bool       { return g.costToOracle <= g.costGoal+1e-9 }

// met says whether every per-workload goal holds.
func (g goal) met() bool {
	return g.attainmentMet() && g.costMet() && len(g.dominatedBy) == 0 && !g.peakOver
}

// goalOf judges wva's row of a report by the bounds of bursty traffic, or
// of smooth curves; ok is false without a wva and an oracle row.
func goalOf(rep sim.Report, smooth bool) (goal, bool) {
	wva, ok := rep.Row(simpolicies.PolicyWVA)
	oracle, hasOracle := rep.Row(simpolicies.PolicyOracle)
	if !ok || !hasOracle || rep.Verdict == nil {
		return goal{}, false
	}
	allowance, bound := attainmentAllowance, costBound
	if smooth {
		allowance, bound = 0, smoothCostBound
	}
	g := goal{
		attainment:     wva.SLOAttainment,
		attainmentGoal: math.Min(rep.SLO.Attainment, oracle.SLOAttainment) - allowance,
		costToOracle:   wva.CostToOracle,
		costGoal:       bound,
		eventsPerHour:  perHour(wva.ScaleEvents, rep.Stats.Duration),
		dominatedBy:    rep.Verdict.DominatedBy,
		peakOver:       rep.Verdict.Overshoot,
	}
	return g, true
}

func perHour(events int, trace time.Duration) float64 {
	if h := trace.Hours(); h > 0 {
		return float64(events) / h
	}
	return 0
}

// judged collects the goals of the workloads judged so far, in order.
type judged struct {
	names []string
	goals []goal
}

// add judges a workload's report; a report without a wva and an oracle row
// is left out.
func (j *judged) add(w workload, rep sim.Report) {
	if g, ok := goalOf(rep, w.Smooth); ok {
		j.names, j.goals = append(j.names, w.Name), append(j.goals, g)
	}
}

func (j judged) table() string { return goalsTable(j.names, j.goals) }

// goalRow is one workload's row of the goals table.
func goalRow(workload string, g goal) string {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	dominated := "not dominated"
	if n := len(g.dominatedBy); n > 0 {
		dominated = fmt.Sprintf("**dominated** by %d rows", n)
		if n == 1 {
			dominated = "**dominated** by 1 row"
		}
	}
	peak := "within"
	if g.peakOver {
		peak = "**over**"
	}
	return fmt.Sprintf("| %s | %.2f%% (goal %.2f%%): %s | %.2f (goal %.1f): %s | %s | %s | %.1f | %s |\n", workload,
		100*g.attainment, 100*g.attainmentGoal, mark(g.attainmentMet()), g.costToOracle, g.costGoal, mark(g.costMet()),
		dominated, peak, g.eventsPerHour, mark(g.met()))
}

// goalsTable renders the goals table of the workloads' goals (in order)
// and the line on scale events over all of them.
func goalsTable(names []string, goals []goal) string {
	var b strings.Builder
	b.WriteString("| workload | SLO met | x oracle | against every causal policy | peak replicas | scale events / h | every goal |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	events, met := 0.0, 0
	for i, g := range goals {
		b.WriteString(goalRow(names[i], g))
		events += g.eventsPerHour
		if g.met() {
			met++
		}
	}
	mean := 0.0
	if len(goals) > 0 {
		mean = events / float64(len(goals))
	}
	word := "within"
	if mean > eventsGoal {
		word = "**over**"
	}
	fmt.Fprintf(&b, "\nEvery goal met on %d of %d workloads; %.1f scale events per hour of trace on average, %s the goal of %.0f.\n",
		met, len(goals), mean, word, eventsGoal)
	return b.String()
}
