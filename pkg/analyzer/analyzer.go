// Package analyzer defines the seam between the collected metrics of a
// variant group and the optimizer. Each analyzer lives in its own package and
// is a pure function of its inputs.
package analyzer

import (
	"fmt"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Result is an analyzer's output: the capacity signal for the optimizer and
// the analyzer's own intermediate quantities (for status, logs and
// `wva decide`), which must marshal to JSON.
type Result struct {
	Signal  decision.Signal
	Details any
	// State is what a stateful analyzer remembers about the group after this
	// cycle (learned parameters, rolling history, remembered capacity); nil
	// for stateless analyzers. It marshals to JSON, and the caller hands it
	// back, as is or as the JSON it was stored as, on the next cycle.
	State any
}

// Analyzer quantifies how much capacity a group needs or can give back.
type Analyzer interface {
	Name() string
	Analyze(g decision.Group, cfg params.Resolved) (Result, error)
}

// Stateful is an analyzer that carries memory from one cycle to the next as
// an explicit value: prev is the State of the group's previous Result (the
// typed value, or its JSON as json.RawMessage or []byte after a restart), or
// nil on the first cycle. A prev of another analyzer's type is ignored.
// Analyze of a Stateful analyzer is AnalyzeState with prev nil.
type Stateful interface {
	Analyzer
	AnalyzeState(g decision.Group, cfg params.Resolved, prev any) (Result, error)
}

// SpareReporter is implemented by analysis details that measure the
// group's average spare KV cache and queue capacity (the engine exports
// them as gauges for the dashboard).
type SpareReporter interface {
	Spare() (kv, queue float64)
}

// RateReporter is implemented by analysis details that size the group by
// request rate. The engine exports the figures as gauges, for the
// dashboard and to set beside what a replica serves within the SLO on the
// group's traffic (`wva simulate capacity`, or a load test).
type RateReporter interface {
	Rates() Rates
}

// Rates are a group's figures in requests per second: the arrivals the
// analyzer read, the rate it sized the group for, what the current
// replicas supply by its model, and the rate it credits one replica of
// each variant, by variant name.
type Rates struct {
	Arrivals   float64
	Required   float64
	Supply     float64
	PerReplica map[string]float64
}

// StuckReporter is implemented by analysis details that find variants in
// transition for longer than their bound; the engine shows them on the
// VAs (condition TransitionStuck, one Event at onset). The message says
// which pods and since when.
type StuckReporter interface {
	StuckVariants() map[string]string
}

// Summarizer is implemented by analysis details that can describe their
// intermediate quantities as lines of text (for `wva decide -o table`).
type Summarizer interface {
	Summary() []string
}

// RoleSummary is one role's summary lines of a disaggregated group's
// analysis, indented under the role's name.
func RoleSummary(role decision.Role, s Summarizer) []string {
	lines := []string{fmt.Sprintf("role %s:", role)}
	for _, l := range s.Summary() {
		lines = append(lines, "  "+l)
	}
	return lines
}
