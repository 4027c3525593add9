package decide

import (
	"fmt"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/planner"
	"github.com/wva-project/wva/pkg/analyzer/queueing"
	"github.com/wva-project/wva/pkg/analyzer/saturation"
	"github.com/wva-project/wva/pkg/analyzer/token"
	"github.com/wva-project/wva/pkg/decide/optimizer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// GroupInput is one variant group with what the collector learned about it.
type GroupInput struct {
	Group               decision.Group
	Config              params.Resolved
	Metrics             MetricsState
	MetricsLastSeen     time.Time
	RequestsInRetention *float64
	// State is the State of the group's previous GroupResult (the value, or
	// the JSON it was stored as); nil on the first cycle. Stateful analyzers
	// (token-based, queueing-model) keep their memory in it.
	State any
}

// GroupResult is the decision for one group.
type GroupResult struct {
	ModelID   string
	Namespace string
	Analyzer  string
	// Analysis is the analyzer's details; nil when it did not run.
	Analysis any
	Signal   decision.Signal
	Targets  []decision.Target
	// Err is set when the group's analyzer failed; its targets then come
	// from the enforcer's fallback path, as if metrics were unreachable.
	Err error
	// State is the analyzer's memory to pass back as GroupInput.State next
	// cycle. When the analyzer did not run it is the input State unchanged,
	// so a metrics outage loses nothing.
	State any
}

// Pipeline holds the stage implementations.
type Pipeline struct {
	Analyzers map[string]analyzer.Analyzer
	// Optimizer decides the groups that do not enable the limiter (and all
	// groups when Budget is nil).
	Optimizer optimizer.Optimizer
	// Budget is the GPU inventory of this run (per accelerator, GPUs free
	// for new replicas); nil when unknown. Groups whose configuration sets
	// enableLimiter share it through the greedy-by-score optimizer, after
	// the other groups' scale-ups have been taken out of it.
	Budget decision.Free
}

// Default is the pipeline with every analyzer wva ships and the cost-aware
// optimizer.
func Default() Pipeline {
	return Pipeline{
		Analyzers: map[string]analyzer.Analyzer{
			saturation.Name: saturation.Analyzer{},
			token.Name:      token.Analyzer{},
			queueing.Name:   queueing.Analyzer{},
			planner.Name:    planner.Analyzer{},
		},
		Optimizer: optimizer.CostAware{},
	}
}

// Run decides every group at time now. Results are in input order.
func (p Pipeline) Run(now time.Time, inputs []GroupInput) []GroupResult {
	results := make([]GroupResult, len(inputs))
	var reqs []optimizer.Request
	var reqIndex []int
	var limited []bool
	for i, in := range inputs {
		res := &results[i]
		res.ModelID, res.Namespace = in.Group.ModelID, in.Group.Namespace
		res.Analyzer = in.Config.Analyzer()
		res.State = in.State
		if in.Metrics != MetricsAvailable {
			continue
		}
		a, ok := p.Analyzers[res.Analyzer]
		if !ok {
			res.Err = fmt.Errorf("analyzer %q is not available in this build", res.Analyzer)
			continue
		}
		in.Group.Now = now
		var out analyzer.Result
		var err error
		if sa, ok := a.(analyzer.Stateful); ok {
			out, err = sa.AnalyzeState(in.Group, in.Config, in.State)
		} else {
			out, err = a.Analyze(in.Group, in.Config)
		}
		if err != nil {
			res.Err = fmt.Errorf("analyzer %s: %w", res.Analyzer, err)
			continue
		}
		res.Analysis, res.Signal = out.Details, out.Signal
		if out.State != nil {
			res.State = out.State
		}
		// A disaggregated group is optimized per role: each part only
		// touches its own variants.
		for _, part := range splitRoles(in.Group, out.Signal) {
			reqs = append(reqs, part)
			reqIndex = append(reqIndex, i)
			limited = append(limited, in.Config.Scaling.EnableLimiter && p.Budget != nil)
		}
	}
	optimized := make([][]decision.Target, len(inputs))
	for j, targets := range p.optimize(reqs, limited) {
		optimized[reqIndex[j]] = append(optimized[reqIndex[j]], targets...)
	}
	for i, in := range inputs {
		metrics := in.Metrics
		if results[i].Err != nil {
			metrics = MetricsUnreachable
		}
		ein := in.EnforcerInput(now)
		ein.Metrics, ein.Targets = metrics, optimized[i]
		results[i].Targets = Enforce(ein)
	}
	return results
}

// EnforcerInput is the enforcer's view of the group at now, without the
// optimizer's targets.
func (in GroupInput) EnforcerInput(now time.Time) Input {
	return Input{
		Now:                 now,
		Metrics:             in.Metrics,
		MetricsLastSeen:     in.MetricsLastSeen,
		RequestsInRetention: in.RequestsInRetention,
		ScaleToZero:         in.Config.ScaleToZero,
		Variants:            in.Group.Variants,
		Replicas:            in.Group.Replicas,
		SchedulerQueueSize:  in.Group.SchedulerQueueSize,
	}
}

// RequestCountMissing reports the group's request counter missing while
// its pods report (RequestCountMissing).
func (in GroupInput) RequestCountMissing() bool {
	return RequestCountMissing(in.EnforcerInput(time.Time{}))
}

// optimize runs the unlimited requests through p.Optimizer, takes their
// scale-ups out of the budget, and shares what is left among the limited
// requests with the greedy-by-score optimizer.
func (p Pipeline) optimize(reqs []optimizer.Request, limited []bool) [][]decision.Target {
	out := make([][]decision.Target, len(reqs))
	var free, capped []optimizer.Request
	var freeIdx, cappedIdx []int
	for j, r := range reqs {
		if limited[j] {
			capped, cappedIdx = append(capped, r), append(cappedIdx, j)
		} else {
			free, freeIdx = append(free, r), append(freeIdx, j)
		}
	}
	left := p.Budget.Copy()
	if len(free) > 0 {
		for k, targets := range p.Optimizer.Optimize(free) {
			out[freeIdx[k]] = targets
			if left != nil {
				left.Spend(free[k].Group, targets)
			}
		}
	}
	if len(capped) > 0 {
		for k, targets := range (optimizer.GreedyByScore{Budget: left}).Optimize(capped) {
			out[cappedIdx[k]] = targets
		}
	}
	return out
}

// splitRoles turns a signal with per-role parts into one request per part,
// each with only that part's variants and replicas; other signals pass as
// one request.
func splitRoles(g decision.Group, sig decision.Signal) []optimizer.Request {
	if len(sig.Roles) == 0 || sig.Hold {
		return []optimizer.Request{{Group: g, Signal: sig}}
	}
	out := make([]optimizer.Request, 0, len(sig.Roles))
	covered := map[string]bool{}
	for _, part := range sig.Roles {
		names := map[string]bool{}
		for _, n := range part.Variants {
			names[n] = true
			covered[n] = true
		}
		sub := g
		sub.Variants, sub.Replicas = nil, nil
		for _, v := range g.Variants {
			if names[v.Name] {
				sub.Variants = append(sub.Variants, v)
			}
		}
		for _, r := range g.Replicas {
			if names[r.Variant] {
				sub.Replicas = append(sub.Replicas, r)
			}
		}
		s := sig
		s.Roles = nil
		s.RequiredCapacity, s.SpareCapacity, s.Reason = part.RequiredCapacity, part.SpareCapacity, part.Reason
		s.Hold, s.HeldTargets = part.Hold, part.HeldTargets
		out = append(out, optimizer.Request{Group: sub, Signal: s})
	}
	// Variants no part names keep their replicas.
	rest := g
	rest.Variants, rest.Replicas = nil, nil
	for _, v := range g.Variants {
		if !covered[v.Name] {
			rest.Variants = append(rest.Variants, v)
		}
	}
	if len(rest.Variants) > 0 {
		s := sig
		s.Roles = nil
		s.RequiredCapacity, s.SpareCapacity = 0, 0
		out = append(out, optimizer.Request{Group: rest, Signal: s})
	}
	return out
}
