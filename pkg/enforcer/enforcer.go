// Package enforcer applies the policies that sit after the optimizer: replica
// bounds, scale to zero for idle groups, and the fallback / retention /
// last-resort hierarchy (seeds/scaling-behavior.md) when metrics are missing.
// Time is an input; nothing here reads a clock.
package enforcer

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
)

// MetricsState says what the collector could learn about a group this cycle.
type MetricsState string

const (
	// MetricsAvailable: the optimizer ran on fresh metrics.
	MetricsAvailable MetricsState = "available"
	// MetricsAbsent: the metrics source answered but has no series for the
	// group (no pod reporting). The retention hierarchy applies.
	MetricsAbsent MetricsState = "absent"
	// MetricsUnreachable: the metrics source failed. Nothing is known about
	// load, so the previous decision holds: wva never scales down, or to
	// zero, because Prometheus is down.
	MetricsUnreachable MetricsState = "unreachable"
)

// Input is everything the enforcer needs for one variant group.
type Input struct {
	Now     time.Time
	Metrics MetricsState
	// MetricsLastSeen is when the group last had metrics; zero if unknown.
	// The retention period of the fallback path runs from it (or, when it is
	// zero, from the latest decision update).
	MetricsLastSeen time.Time
	// RequestsInRetention is the group's successful requests over the
	// retention period; nil when unknown (idle detection is then skipped).
	RequestsInRetention *float64
	ScaleToZero         config.ScaleToZero
	Variants            []decision.Variant
	// Targets is the optimizer's output; used only with MetricsAvailable.
	Targets []decision.Target
}

// Enforce returns the final target of every variant, sorted by name.
func Enforce(in Input) []decision.Target {
	variants := append([]decision.Variant(nil), in.Variants...)
	sort.Slice(variants, func(i, j int) bool { return variants[i].Name < variants[j].Name })
	switch in.Metrics {
	case MetricsAvailable:
		return withOptimizer(in, variants)
	case MetricsUnreachable:
		return preserve(variants, decision.RuleUnreachableHold, "Fallback: metrics source unreachable, preserving previous allocation")
	default:
		return withoutMetrics(in, variants)
	}
}

func withOptimizer(in Input, variants []decision.Variant) []decision.Target {
	byName := make(map[string]decision.Target, len(in.Targets))
	for _, t := range in.Targets {
		byName[t.Variant] = t
	}
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		t, ok := byName[v.Name]
		if !ok {
			t = decision.Target{Variant: v.Name, Replicas: v.CurrentReplicas, Rule: decision.RuleSteady, Reason: "no optimizer target, keeping current"}
		}
		if n := decision.Clamp(t.Replicas, v.MinReplicas, v.MaxReplicas); n != t.Replicas {
			t.Reason = strings.TrimSuffix(fmt.Sprintf("clamped %d to [%d, %d]; %s", t.Replicas, v.MinReplicas, v.MaxReplicas, t.Reason), "; ")
			t.Replicas = n
			t.Rule = decision.RuleClamped
		}
		if t.Reason == "" {
			t.Reason = "optimizer target"
		}
		if t.Rule == "" {
			t.Rule = decision.RuleSteady
		}
		targets = append(targets, t)
	}
	switch {
	case idle(in) && allowsZero(variants) && firstRun(variants):
		return relabel(targets, variants, "First run: preserving current replicas for Prometheus discovery grace period (group idle)")
	case idle(in) && allowsZero(variants) && in.ScaleToZero.Enabled:
		return setAll(variants, 0, decision.RuleScaleToZero, fmt.Sprintf("Scale-to-zero: no requests in retention period (%s)", in.ScaleToZero.RetentionPeriod))
	case idle(in) && allowsZero(variants):
		// Idle with scale to zero disabled: the minimal footprint is one
		// replica of the cheapest variant.
		return cheapestOnly(variants, fmt.Sprintf("Scale-to-zero disabled: no requests in retention period (%s), cheapest variant keeps 1 replica",
			in.ScaleToZero.RetentionPeriod))
	case allowsZero(variants) && !in.ScaleToZero.Enabled && total(targets) == 0:
		return keepCheapest(variants, targets, "Scale-to-zero disabled: cheapest variant keeps 1 replica")
	}
	return finish(targets, variants)
}

// cheapestOnly gives the cheapest variant 1 replica and the others 0.
func cheapestOnly(variants []decision.Variant, why string) []decision.Target {
	targets := setAll(variants, 0, decision.RuleKeepCheapest, why)
	return keepCheapest(variants, targets, why)
}

// withoutMetrics is the fallback and last-resort path.
func withoutMetrics(in Input, variants []decision.Variant) []decision.Target {
	retention := in.ScaleToZero.RetentionPeriod.D()
	since := in.MetricsLastSeen
	if since.IsZero() {
		since = latestUpdate(variants)
	}
	if since.IsZero() || in.Now.Sub(since) < retention {
		return lastResort(variants)
	}
	elapsed := in.Now.Sub(since).Round(time.Second)
	if !allowsZero(variants) {
		targets := make([]decision.Target, 0, len(variants))
		for _, v := range variants {
			targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(v.MinReplicas, v.MinReplicas, v.MaxReplicas), Rule: decision.RuleRetention,
				Reason: fmt.Sprintf("Fallback: using minReplicas=%d after retention period (no metrics for %s > %s)", v.MinReplicas, elapsed, in.ScaleToZero.RetentionPeriod)})
		}
		return finish(targets, variants)
	}
	if in.ScaleToZero.Enabled {
		return setAll(variants, 0, decision.RuleRetention, fmt.Sprintf("Fallback: scale-to-zero after retention period (no metrics for %s > %s)", elapsed, in.ScaleToZero.RetentionPeriod))
	}
	cheapest := cheapestName(variants)
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		t := decision.Target{Variant: v.Name, Replicas: 0, Rule: decision.RuleRetention,
			Reason: "Fallback: non-cheapest variant scaled to 0 after retention period (no metrics, scaleToZero disabled)"}
		if v.Name == cheapest {
			t.Replicas = 1
			t.Reason = "Fallback: cheapest variant with 1 replica after retention period (no metrics, scaleToZero disabled)"
		}
		targets = append(targets, t)
	}
	return finish(targets, variants)
}

// lastResort keeps the controller's intent while the retention period runs.
func lastResort(variants []decision.Variant) []decision.Target {
	othersRunning := func(name string) bool {
		for _, v := range variants {
			if v.Name != name && v.CurrentReplicas > 0 {
				return true
			}
		}
		return false
	}
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		var n int32
		var reason string
		switch {
		case !v.LastUpdate.IsZero() && v.CurrentReplicas > v.DesiredReplicas:
			n = v.CurrentReplicas
			reason = fmt.Sprintf("Last resort: deployment discovered late, using current=%d (was %d)", v.CurrentReplicas, v.DesiredReplicas)
		case !v.LastUpdate.IsZero():
			n = max(v.MinReplicas, v.DesiredReplicas)
			reason = fmt.Sprintf("Last resort: maintaining controller intent: max(minReplicas=%d, previousOptimized=%d) = %d", v.MinReplicas, v.DesiredReplicas, n)
		case v.CurrentReplicas == 0 && v.MinReplicas == 0 && othersRunning(v.Name):
			n = 0
			reason = "Last resort: first run, other variants handling load, starting at 0"
		case v.CurrentReplicas == 0 && v.MinReplicas == 0:
			n = 1
			reason = "Last resort: first run with current=0, using safe default of 1 (waiting for deployment discovery)"
		default:
			n = v.CurrentReplicas
			reason = fmt.Sprintf("Last resort: first run, using current=%d", v.CurrentReplicas)
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(n, v.MinReplicas, v.MaxReplicas), Rule: decision.RuleLastResort, Reason: reason})
	}
	return finish(targets, variants)
}

// preserve holds the previous decision (or, on the first run, the current
// replica count), within bounds.
func preserve(variants []decision.Variant, rule decision.Rule, why string) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n := v.DesiredReplicas
		reason := fmt.Sprintf("%s %d", why, n)
		if v.LastUpdate.IsZero() {
			n = v.CurrentReplicas
			reason = fmt.Sprintf("%s: first run, keeping current %d", why, n)
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(n, v.MinReplicas, v.MaxReplicas), Rule: rule, Reason: reason})
	}
	return finish(targets, variants)
}

func idle(in Input) bool {
	return in.RequestsInRetention != nil && *in.RequestsInRetention <= 0
}

// allowsZero: scale to zero is skipped when any variant has minReplicas > 0.
func allowsZero(variants []decision.Variant) bool {
	for _, v := range variants {
		if v.MinReplicas > 0 {
			return false
		}
	}
	return len(variants) > 0
}

func firstRun(variants []decision.Variant) bool { return latestUpdate(variants).IsZero() }

func latestUpdate(variants []decision.Variant) time.Time {
	var t time.Time
	for _, v := range variants {
		if v.LastUpdate.After(t) {
			t = v.LastUpdate
		}
	}
	return t
}

// cheapestName is the variant with the lowest cost, alphabetically first on
// a tie.
func cheapestName(variants []decision.Variant) string {
	best := -1
	for i, v := range variants {
		if best < 0 || v.Cost < variants[best].Cost || (v.Cost == variants[best].Cost && v.Name < variants[best].Name) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return variants[best].Name
}

func keepCheapest(variants []decision.Variant, targets []decision.Target, why string) []decision.Target {
	cheapest := cheapestName(variants)
	for i := range targets {
		if targets[i].Variant == cheapest {
			targets[i].Replicas = 1
			targets[i].Rule = decision.RuleKeepCheapest
			targets[i].Reason = why
		}
	}
	return finish(targets, variants)
}

func setAll(variants []decision.Variant, n int32, rule decision.Rule, why string) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: n, Rule: rule, Reason: why})
	}
	return finish(targets, variants)
}

func relabel(targets []decision.Target, variants []decision.Variant, why string) []decision.Target {
	for i := range targets {
		targets[i].Replicas = decision.Clamp(variants[i].CurrentReplicas, variants[i].MinReplicas, variants[i].MaxReplicas)
		targets[i].Rule = decision.RuleFirstRunGrace
		targets[i].Reason = why
	}
	return finish(targets, variants)
}

// finish fills in each target's action from its variant's current replicas.
// A "blocked" action from the optimizer is kept: it says no new decision was
// made. targets[i] belongs to variants[i] on every path.
func finish(targets []decision.Target, variants []decision.Variant) []decision.Target {
	for i := range targets {
		if targets[i].Action != decision.ActionBlocked {
			targets[i].Action = decision.ActionFor(variants[i].CurrentReplicas, targets[i].Replicas)
		}
	}
	return targets
}

func total(targets []decision.Target) int32 {
	var n int32
	for _, t := range targets {
		n += t.Replicas
	}
	return n
}
