// Package analyzer defines the seam between the collected metrics of a
// variant group and the optimizer. Each analyzer lives in its own package and
// is a pure function of its inputs.
package analyzer

import (
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
)

// Result is an analyzer's output: the capacity signal for the optimizer and
// the analyzer's own intermediate quantities (for status, logs and
// `wva decide`), which must marshal to JSON.
type Result struct {
	Signal  decision.Signal
	Details any
}

// Analyzer quantifies how much capacity a group needs or can give back.
type Analyzer interface {
	Name() string
	Analyze(g decision.Group, cfg config.Resolved) (Result, error)
}
