package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decide/optimizer"
	"github.com/wva-project/wva/pkg/decision"
)

// Output is `wva decide`'s machine-readable result.
type Output struct {
	ModelID   string          `json:"modelID"`
	Namespace string          `json:"namespace"`
	Analyzer  string          `json:"analyzer"`
	Metrics   string          `json:"metrics"`
	Now       *time.Time      `json:"now,omitempty"`
	Analysis  any             `json:"analysis"`
	Signal    *SignalOutput   `json:"signal,omitempty"`
	Variants  []VariantOutput `json:"variants"`
	// Optimizer is cost-aware, or greedy-by-score in limited mode, which
	// also echoes the budget.
	Optimizer string        `json:"optimizer"`
	Budget    decision.Free `json:"budget,omitempty"`
	// State is the analyzer's memory after this decision; pass it back as
	// the snapshot's state to decide the next cycle.
	State any `json:"state,omitempty"`
}

// SignalOutput is the analyzer's capacity signal.
type SignalOutput struct {
	Hold             bool    `json:"hold"`
	RequiredCapacity float64 `json:"requiredCapacity"`
	SpareCapacity    float64 `json:"spareCapacity"`
	// CapacityPerReplica is each variant's capacity in the signal's unit
	// (tokens, requests per second); empty for the percentage analyzer.
	CapacityPerReplica map[string]float64 `json:"capacityPerReplica,omitempty"`
	Priority           float64            `json:"priority"`
	Roles              []RoleOutput       `json:"roles,omitempty"`
	Reason             string             `json:"reason"`
}

// RoleOutput is the signal of one role of a disaggregated group.
type RoleOutput struct {
	Role             decision.Role `json:"role"`
	Variants         []string      `json:"variants"`
	RequiredCapacity float64       `json:"requiredCapacity"`
	SpareCapacity    float64       `json:"spareCapacity"`
	Reason           string        `json:"reason"`
}

// VariantOutput is the decision for one variant.
type VariantOutput struct {
	Name            string          `json:"name"`
	CurrentReplicas int32           `json:"currentReplicas"`
	TargetReplicas  int32           `json:"targetReplicas"`
	Action          decision.Action `json:"action"`
	Rule            decision.Rule   `json:"rule"`
	Reason          string          `json:"reason"`
}

// Decide runs the default pipeline on a validated snapshot.
func Decide(s *Snapshot) (Output, error) {
	in, now, err := s.Input()
	if err != nil {
		return Output{}, err
	}
	p := decide.Default()
	optName := p.Optimizer.Name()
	if len(s.Budget) > 0 {
		p.Budget = decision.Free(s.Budget)
		optName = optimizer.GreedyByScore{}.Name()
	}
	res := p.Run(now, []decide.GroupInput{in})[0]
	if res.Err != nil {
		return Output{}, res.Err
	}
	out := Output{
		ModelID: s.ModelID, Namespace: s.Namespace, Analyzer: res.Analyzer,
		Metrics: string(in.Metrics), Analysis: res.Analysis, Optimizer: optName, Budget: p.Budget,
	}
	if res.Analysis != nil {
		out.State = res.State
	}
	if !now.Equal(time.Unix(0, 0)) {
		out.Now = &now
	}
	if res.Analysis != nil {
		out.Signal = &SignalOutput{Hold: res.Signal.Hold, RequiredCapacity: res.Signal.RequiredCapacity,
			SpareCapacity: res.Signal.SpareCapacity, Reason: res.Signal.Reason,
			CapacityPerReplica: res.Signal.CapacityPerReplica, Priority: res.Signal.Priority}
		for _, r := range res.Signal.Roles {
			out.Signal.Roles = append(out.Signal.Roles, RoleOutput{Role: r.Role, Variants: r.Variants,
				RequiredCapacity: r.RequiredCapacity, SpareCapacity: r.SpareCapacity, Reason: r.Reason})
		}
	}
	for _, t := range res.Targets {
		v, _ := in.Group.Variant(t.Variant)
		out.Variants = append(out.Variants, VariantOutput{
			Name: t.Variant, CurrentReplicas: v.CurrentReplicas, TargetReplicas: t.Replicas, Action: t.Action, Rule: t.Rule, Reason: t.Reason,
		})
	}
	return out, nil
}

// Render formats the output as "json" or "table". The whole text is built
// before anything is written, so a failure never leaves half a result.
func Render(out Output, format string) ([]byte, error) {
	var buf bytes.Buffer
	switch format {
	case "json":
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return nil, err
		}
	case "table", "":
		// Names and texts from the snapshot are escaped and cut (DisplayName,
		// DisplayText): a name must not write to the terminal or forge rows.
		fmt.Fprintf(&buf, "model %s (namespace %s), analyzer %s, metrics %s\n",
			DisplayName(out.ModelID), DisplayName(out.Namespace), DisplayName(out.Analyzer), DisplayName(out.Metrics))
		if sum, ok := out.Analysis.(analyzer.Summarizer); ok {
			fmt.Fprintln(&buf, "analysis:")
			for _, line := range sum.Summary() {
				fmt.Fprintln(&buf, DisplayText(line))
			}
		}
		if out.Signal != nil {
			fmt.Fprintf(&buf, "signal: %s\n", DisplayText(out.Signal.Reason))
			for _, r := range out.Signal.Roles {
				fmt.Fprintf(&buf, "  %s: required %.4g, spare %.4g\n", r.Role, r.RequiredCapacity, r.SpareCapacity)
			}
		}
		if len(out.Budget) > 0 {
			fmt.Fprintf(&buf, "optimizer: %s, GPU budget %s\n", out.Optimizer, DisplayText(fmt.Sprint(map[string]int64(out.Budget))))
		}
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VARIANT\tCURRENT\tTARGET\tACTION\tREASON")
		for _, v := range out.Variants {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", DisplayName(v.Name), v.CurrentReplicas, v.TargetReplicas, v.Action, DisplayText(v.Reason))
		}
		if err := tw.Flush(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("output format %q: want json or table", format)
	}
	return buf.Bytes(), nil
}
