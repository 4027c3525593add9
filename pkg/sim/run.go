package sim

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// Options control one Run.
type Options struct {
	// Policies to compare, in report order (default: all).
	Policies []string
	// Progress, when set, is called now and then with the fraction done
	// (0..1), from any goroutine.
	Progress func(done float64)
	// Explain keeps every wva engine cycle's decision in the report
	// (Report.Decisions).
	Explain bool
}

// Decision is one wva engine cycle's decision for a group: the analyzer's
// account of it (the lines the adapter logs) and each variant's target.
type Decision struct {
	// At is the time since the measured trace began (the timeline's
	// clock), negative during the warm-up pre-roll.
	At        time.Duration
	ModelID   string
	Namespace string
	Analyzer  string
	// Summary is the analyzer's own account (analyzer.Summarizer), if it
	// gives one; Reason the signal's.
	Summary []string
	Reason  string
	Err     error
	Targets []decision.Target
}

// PolicySummary is one policy's figures.
type PolicySummary struct {
	Policy string `json:"policy"`
	// Cost is the sum over variants of cost x replica-hours, counting every
	// pod from creation (model load included) to deletion, over the trace.
	Cost float64 `json:"cost"`
	// CostToOracle is Cost / the oracle's cost (0 without an oracle).
	CostToOracle float64            `json:"costToOracle"`
	ReplicaHours map[string]float64 `json:"replicaHours"`
	Requests     int                `json:"requests"`
	// SLOAttainment is the fraction of requests with TTFT and average ITL
	// within the targets (requests rejected or never finished miss).
	SLOAttainment float64 `json:"sloAttainment"`
	TTFTp50       float64 `json:"ttftP50Seconds"`
	TTFTp99       float64 `json:"ttftP99Seconds"`
	ITLp50        float64 `json:"itlP50Seconds"`
	ITLp99        float64 `json:"itlP99Seconds"`
	// ScaleEvents counts changes of any variant's spec.replicas.
	ScaleEvents  int     `json:"scaleEvents"`
	MeanReplicas float64 `json:"meanReplicas"`
	MaxReplicas  int32   `json:"maxReplicas"`
	Preemptions  int64   `json:"preemptions"`
	Rejected     int     `json:"rejected"`
	// Frontier is the policy's cost against attainment over its knob
	// (wva simulate --frontier); nil otherwise.
	Frontier   *Frontier `json:"frontier,omitempty"`
	Unfinished int       `json:"unfinished"`
	// Simulated says the figures come from the simulation; the oracle's
	// latency figures are those of its plan replayed with no start-up delay.
	Note string `json:"note,omitempty"`
	// LowerBound is the oracle's per-interval plan cost, each interval
	// tested from an empty fleet: a lower bound, not a plan that meets the
	// SLO when replayed (0 for other policies).
	LowerBound float64 `json:"lowerBound,omitempty"`
	// EngineSteps is how many server iterations were simulated.
	EngineSteps int64             `json:"engineSteps"`
	Elapsed     float64           `json:"-"`
	Timeline    []fleet.TimePoint `json:"-"`
	Plan        *oracle.Plan      `json:"-"`
	variants    []string
}

// Report is a whole comparison.
type Report struct {
	Scenario string          `json:"scenario"`
	Trace    string          `json:"trace"`
	Stats    trace.Stats     `json:"traceStats"`
	SLO      SLOSummary      `json:"slo"`
	Variants []VariantBrief  `json:"variants"`
	Policies []PolicySummary `json:"policies"`
	Elapsed  float64         `json:"wallSeconds"`
	Analyzer string          `json:"wvaAnalyzer,omitempty"`
	// Verdict compares wva's row with the others (nil without a wva row).
	Verdict *Verdict      `json:"wvaVerdict,omitempty"`
	Horizon time.Duration `json:"-"`
	// Decisions are wva's engine cycles, in order (Options.Explain).
	Decisions []Decision `json:"-"`
}

// SLOSummary is the SLO in seconds.
type SLOSummary struct {
	TTFT       float64 `json:"ttftSeconds"`
	ITL        float64 `json:"itlSeconds"`
	Attainment float64 `json:"attainment"`
}

// VariantBrief names a variant in the report.
type VariantBrief struct {
	Name         string  `json:"name"`
	Accelerator  string  `json:"accelerator"`
	Cost         float64 `json:"cost"`
	StartupDelay float64 `json:"startupDelaySeconds"`
}

// Run simulates every policy on the trace (in parallel, each on its own
// copy of the fleet; results do not depend on scheduling) and computes the
// oracle.
func Run(sc scenario.Scenario, trace trace.Trace, opts Options) (Report, error) {
	start := time.Now()
	if err := sc.Validate(); err != nil {
		return Report{}, err
	}
	names := opts.Policies
	if len(names) == 0 {
		names = policies.AllPolicies
	}
	rep := Report{Scenario: sc.Name, Trace: trace.Name, Stats: trace.Stats(),
		SLO:     SLOSummary{TTFT: sc.SLO.TTFT.D().Seconds(), ITL: sc.SLO.ITL.D().Seconds(), Attainment: sc.SLO.Attainment},
		Horizon: fleet.CostHorizon(&trace, sc.Control.OracleInterval.D())}
	for _, v := range sc.Variants {
		rep.Variants = append(rep.Variants, VariantBrief{Name: v.Name, Accelerator: v.Accelerator, Cost: v.Cost, StartupDelay: v.StartupDelay.D().Seconds()})
	}
	ctls, err := controlPlanes(&sc, names, &rep)
	if err != nil {
		return Report{}, err
	}
	if p, ok := ctls[policies.PolicyWVA].(*policies.WVA); ok && opts.Explain {
		// Only wva's own row runs this control plane, on one goroutine.
		p.Observe(func(now time.Duration, res []decide.GroupResult) {
			for _, r := range res {
				rep.Decisions = append(rep.Decisions, decisionOf(now, r))
			}
		})
	}
	plan := oraclePlan(&sc, &trace, names)
	rows := reportRows(&sc, rep.Stats, names, plan)
	summaries := runRows(&sc, &trace, rows, ctls, plan, rep.Horizon, opts.Progress)
	if plan != nil && plan.Cost > 0 {
		for i := range summaries {
			summaries[i].CostToOracle = summaries[i].Cost / plan.Cost
		}
	}
	rep.Policies = summaries
	if v, ok := Judge(rep); ok {
		rep.Verdict = &v
	}
	rep.Elapsed = time.Since(start).Seconds()
	return rep, nil
}

// controlPlanes builds every policy's control plane before any simulation,
// so configuration errors fail fast. The oracle and static policies need
// none of their own here (they are set per row).
func controlPlanes(sc *scenario.Scenario, names []string, rep *Report) (map[string]fleet.Policy, error) {
	ctls := make(map[string]fleet.Policy, len(names))
	for _, name := range names {
		switch name {
		case policies.PolicyWVA:
			p, err := policies.NewWVA(sc)
			if err != nil {
				return nil, err
			}
			ctls[name] = p
			rep.Analyzer = p.Analyzer()
		case policies.PolicyWVAV1:
			ctls[name] = policies.NewV1(sc.Policies.V1)
		case policies.PolicyWVAThroughput:
			ctls[name] = policies.NewThroughput(sc.Policies.V1)
		case policies.PolicyQueueThreshold:
			ctls[name] = policies.NewQueueThreshold(sc.Policies.QueueThreshold.TargetWaitingPerReplica)
		case policies.PolicyKPA:
			ctls[name] = policies.NewKPA(sc)
		case policies.PolicyStaticPeak, policies.PolicyStaticFrontier:
			ctls[name] = policies.Static{}
		case policies.PolicyOracle:
		default:
			return nil, fmt.Errorf("unknown policy %q", name)
		}
	}
	return ctls, nil
}

// oraclePlan is the oracle's plan when a row or a warm start needs it (the
// static fleets and the warm fleet are sized from it), else nil. Only the
// oracle's own row needs it repaired to meet the SLO when replayed.
func oraclePlan(sc *scenario.Scenario, trace *trace.Trace, names []string) *oracle.Plan {
	if !slices.Contains(names, policies.PolicyOracle) && !slices.Contains(names, policies.PolicyStaticPeak) &&
		!slices.Contains(names, policies.PolicyStaticFrontier) && sc.Control.InitialFleet != scenario.InitialFleetWarm {
		return nil
	}
	p := oracle.NewPlan(sc, trace)
	if slices.Contains(names, policies.PolicyOracle) {
		p.MakeFeasible(sc, trace)
	}
	return &p
}

// reportRow is one row of the report: a policy, or one fleet of
// static-frontier.
type reportRow struct {
	name, policy string
	fixed        []int32 // a static-frontier fleet
}

// reportRows lists the report's rows: one per policy, static-frontier
// expanded into its fleets.
func reportRows(sc *scenario.Scenario, stats trace.Stats, names []string, plan *oracle.Plan) []reportRow {
	var rows []reportRow
	for _, name := range names {
		if name != policies.PolicyStaticFrontier {
			rows = append(rows, reportRow{name: name, policy: name})
			continue
		}
		for _, m := range oracle.StaticFrontier(sc, stats, oracle.FrontierCostFactor*oracle.MixCost(sc.Variants, plan.Peak), oracle.FrontierMaxRows) {
			rows = append(rows, reportRow{name: oracle.FrontierName(sc, m.Mix), policy: name, fixed: m.Mix})
		}
	}
	return rows
}

// runRows simulates the rows in parallel, at most GOMAXPROCS at a time,
// reporting the simulated time done over all rows to progress.
func runRows(sc *scenario.Scenario, trace *trace.Trace, rows []reportRow, ctls map[string]fleet.Policy, plan *oracle.Plan, horizon time.Duration, progress func(float64)) []PolicySummary {
	var progressed atomic.Int64
	total := int64(len(rows)) * int64(horizon)
	report := func(delta time.Duration) {
		if progress != nil && total > 0 {
			progress(float64(progressed.Add(int64(delta))) / float64(total))
		}
	}
	summaries := make([]PolicySummary, len(rows))
	fleet.Parallel(len(rows), func(i int) {
		summaries[i] = runRow(sc, trace, rows[i], ctls, plan, horizon, report)
	})
	return summaries
}

// runRow simulates one row on its own fleet and summarizes it.
func runRow(sc *scenario.Scenario, trace *trace.Trace, r reportRow, ctls map[string]fleet.Policy, plan *oracle.Plan, horizon time.Duration, report func(time.Duration)) PolicySummary {
	name := r.policy
	t0 := time.Now()
	f := rowFleet(sc, trace, r, ctls, plan)
	var last time.Duration
	f.SetProgress(func(now, end time.Duration) {
		if now-last >= time.Minute || now >= end {
			report(min(now, end) - last)
			last = min(now, end)
		}
	})
	f.Run()
	report(horizon - last)
	s := summarize(r.name, f)
	s.Elapsed = time.Since(t0).Seconds()
	if name == policies.PolicyOracle {
		oracleSummary(&s, sc, plan)
	}
	return s
}

// rowFleet builds the row's fleet: the oracle's plan replayed from time 0
// with no start-up delay, a static fleet, or a policy's control plane from
// the scenario's (or the warm) initial fleet after the warm-up.
func rowFleet(sc *scenario.Scenario, trace *trace.Trace, r reportRow, ctls map[string]fleet.Policy, plan *oracle.Plan) *fleet.Fleet {
	name := r.policy
	scn := *sc
	initial := make([]int32, len(sc.Variants))
	var ctl fleet.Policy
	switch name {
	case policies.PolicyStaticPeak:
		copy(initial, plan.Peak)
		ctl = policies.Static{}
	case policies.PolicyStaticFrontier:
		copy(initial, r.fixed)
		ctl = policies.Static{}
	case policies.PolicyOracle:
		// The plan replayed: replicas change at interval starts and
		// serve at once.
		scn = oracle.ReplayScenario(sc)
		copy(initial, plan.Replicas[0])
		ctl = oracle.NewReplay(plan)
	default:
		for v, spec := range sc.Variants {
			initial[v] = spec.InitialReplicas
			if sc.Control.InitialFleet == scenario.InitialFleetWarm {
				initial[v] = plan.Warm[v]
			}
		}
		ctl = ctls[name]
	}
	if name == policies.PolicyOracle {
		f := fleet.New(&scn, trace, ctl, initial)
		f.SetControlStart(0)
		return f
	}
	warmTrace, w := fleet.WithWarmup(trace, sc.Control.Warmup.D(), sc.Control.WarmupMode == scenario.WarmupMirror)
	f := fleet.NewWarm(&scn, warmTrace, ctl, initial, w)
	f.SetControlStart(sc.Control.MetricsWindow.D())
	return f
}

// oracleSummary replaces the replayed cost with the plan's and says what the
// oracle's figures mean.
func oracleSummary(s *PolicySummary, sc *scenario.Scenario, plan *oracle.Plan) {
	s.Cost = plan.Cost
	s.ReplicaHours = planReplicaHours(sc, plan)
	s.Plan = plan
	s.LowerBound = plan.LowerBound
	s.Note = fmt.Sprintf("cost: the cheapest plan found that meets the SLO replayed with no start-up delay, each minute tested with the backlog the previous one leaves (%d replays of the plan); lower bound %.1f (each minute from an empty fleet; %.1f with replicas paid from the shortest start-up delay before they serve)",
		plan.Repairs, plan.LowerBound, plan.StartupCost)
	if plan.Infeasible > 0 {
		s.Note += fmt.Sprintf("; %d intervals exceed every variant's maxReplicas", plan.Infeasible)
	}
	if plan.Attainment < sc.SLO.Attainment {
		s.Note += fmt.Sprintf("; the plan still misses the SLO after %d replays", plan.Repairs)
	}
}

func planReplicaHours(sc *scenario.Scenario, plan *oracle.Plan) map[string]float64 {
	out := map[string]float64{}
	for _, mix := range plan.Replicas {
		for v, n := range mix {
			out[sc.Variants[v].Name] += float64(n) * plan.Interval.Hours()
		}
	}
	return out
}

func summarize(name string, f *fleet.Fleet) PolicySummary {
	o := f.Summarize()
	return PolicySummary{Policy: name, Cost: o.Cost, ReplicaHours: o.ReplicaHours, Requests: o.Requests, SLOAttainment: o.SLOAttainment,
		TTFTp50: o.TTFTp50, TTFTp99: o.TTFTp99, ITLp50: o.ITLp50, ITLp99: o.ITLp99, ScaleEvents: o.ScaleEvents,
		MeanReplicas: o.MeanReplicas, MaxReplicas: o.MaxReplicas, Preemptions: o.Preemptions, Rejected: o.Rejected,
		Unfinished: o.Unfinished, EngineSteps: o.EngineSteps, Timeline: o.Timeline, variants: o.Variants}
}

// decisionOf is a group's result as a Decision.
func decisionOf(now time.Duration, r decide.GroupResult) Decision {
	d := Decision{At: now, ModelID: r.ModelID, Namespace: r.Namespace, Analyzer: r.Analyzer, Reason: r.Signal.Reason, Err: r.Err, Targets: r.Targets}
	if s, ok := r.Analysis.(analyzer.Summarizer); ok {
		d.Summary = s.Summary()
	}
	return d
}
