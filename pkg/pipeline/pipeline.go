// Package pipeline composes the pure decision stages for a set of variant
// groups: analyze -> optimize -> enforce. The adapter's engine, the simulator
// and `wva decide` all call it, so they decide identically.
package pipeline

import (
	"fmt"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/saturation"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/enforcer"
	"github.com/wva-project/wva/pkg/optimizer"
)

// GroupInput is one variant group with what the collector learned about it.
type GroupInput struct {
	Group               decision.Group
	Config              config.Resolved
	Metrics             enforcer.MetricsState
	MetricsLastSeen     time.Time
	RequestsInRetention *float64
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
}

// Pipeline holds the stage implementations.
type Pipeline struct {
	Analyzers map[string]analyzer.Analyzer
	Optimizer optimizer.Optimizer
}

// Default is the pipeline with every analyzer wva ships and the cost-aware
// optimizer.
func Default() Pipeline {
	return Pipeline{
		Analyzers: map[string]analyzer.Analyzer{
			saturation.Name: saturation.Analyzer{},
		},
		Optimizer: optimizer.CostAware{},
	}
}

// Run decides every group at time now. Results are in input order.
func (p Pipeline) Run(now time.Time, inputs []GroupInput) []GroupResult {
	results := make([]GroupResult, len(inputs))
	var reqs []optimizer.Request
	var reqIndex []int
	for i, in := range inputs {
		res := &results[i]
		res.ModelID, res.Namespace = in.Group.ModelID, in.Group.Namespace
		res.Analyzer = in.Config.Analyzer()
		if in.Metrics != enforcer.MetricsAvailable {
			continue
		}
		a, ok := p.Analyzers[res.Analyzer]
		if !ok {
			res.Err = fmt.Errorf("analyzer %q is not available in this build", res.Analyzer)
			continue
		}
		out, err := a.Analyze(in.Group, in.Config)
		if err != nil {
			res.Err = fmt.Errorf("analyzer %s: %w", res.Analyzer, err)
			continue
		}
		res.Analysis, res.Signal = out.Details, out.Signal
		reqs = append(reqs, optimizer.Request{Group: in.Group, Signal: out.Signal})
		reqIndex = append(reqIndex, i)
	}
	optimized := make([][]decision.Target, len(inputs))
	for j, targets := range p.Optimizer.Optimize(reqs) {
		optimized[reqIndex[j]] = targets
	}
	for i, in := range inputs {
		metrics := in.Metrics
		if results[i].Err != nil {
			metrics = enforcer.MetricsUnreachable
		}
		results[i].Targets = enforcer.Enforce(enforcer.Input{
			Now:                 now,
			Metrics:             metrics,
			MetricsLastSeen:     in.MetricsLastSeen,
			RequestsInRetention: in.RequestsInRetention,
			ScaleToZero:         in.Config.ScaleToZero,
			Variants:            in.Group.Variants,
			Targets:             optimized[i],
		})
	}
	return results
}
