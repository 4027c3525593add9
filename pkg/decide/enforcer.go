package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// MetricsState says what the collector could learn about a group this cycle.
type MetricsState string

const (
	// MetricsAvailable: the optimizer ran on fresh metrics.
	MetricsAvailable MetricsState = "available"
	// MetricsAbsent: the metrics source answered but has no series for the
	// group, and none of its pods is Ready (still loading, crash-looping,
	// unschedulable): nothing runs to report. The retention hierarchy
	// applies.
	MetricsAbsent MetricsState = "absent"
	// MetricsMissing: the metrics source answered with no series for the
	// group although its scale target has Ready pods. That is a scraping
	// fault (PodMonitor, relabeling, model_name label), not idleness: the
	// replicas are held and the retention ladder never walks them to zero.
	MetricsMissing MetricsState = "missing"
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
	// retention period; nil when unknown: idle detection is then skipped,
	// and with pods reporting (Replicas) it is a scraping fault that holds
	// the group's replicas (see RequestCountMissing).
	RequestsInRetention *float64
	ScaleToZero         params.ScaleToZero
	Variants            []decision.Variant
	// Replicas are the group's pods reporting metrics; any load on them
	// (queued requests, KV cache in use) means the group is not idle.
	Replicas []decision.ReplicaMetrics
	// SchedulerQueueSize is the requests held at the gateway (EPP
	// flow-control queue) for the group: while any wait, the group is
	// never decided to zero.
	SchedulerQueueSize float64
	// Targets is the optimizer's output; used only with MetricsAvailable.
	Targets []decision.Target
}

// DefaultStartupAllowance is the wake grace's start-up part for a variant
// whose start-up time is unknown (no startupProbe): long enough for an
// image pull and a large model's load.
const DefaultStartupAllowance = 10 * time.Minute

// WakeMetricsWindow is the wake grace's metrics part: the collector's
// max_over_time / rate window, after which a Ready pod's series read
// fully.
const WakeMetricsWindow = time.Minute

// IdleKvCacheUsage is the KV cache usage at or below which a pod counts as
// carrying no load (vLLM reports the blocks held by running requests).
const IdleKvCacheUsage = 0.01

// WakeGrace is how long after a wake the group is kept off zero: the
// variant's start-up allowance (or DefaultStartupAllowance) plus the
// metrics window.
func WakeGrace(v decision.Variant) time.Duration {
	startup := v.StartupAllowance
	if startup <= 0 {
		startup = DefaultStartupAllowance
	}
	return decision.AddDurations(startup, WakeMetricsWindow) // saturated: a huge allowance must not wrap negative
}

// Enforce returns the final target of every variant, sorted by name.
func Enforce(in Input) []decision.Target {
	variants := append([]decision.Variant(nil), in.Variants...)
	sort.Slice(variants, func(i, j int) bool { return variants[i].Name < variants[j].Name })
	var targets []decision.Target
	switch in.Metrics {
	case MetricsAvailable:
		targets = withOptimizer(in, variants)
	case MetricsUnreachable:
		targets = preserve(variants, decision.RuleUnreachableHold, "metrics source unreachable")
	case MetricsMissing:
		targets = holdMissing(variants)
	default:
		targets = withoutMetrics(in, variants)
	}
	return keepOffZero(in, variants, targets)
}

// RequestCountMissing reports the scraping fault of idle detection: pods
// report saturation metrics but the group's request counter has no series,
// in a group whose bounds allow zero (elsewhere the count decides nothing).
func RequestCountMissing(in Input) bool {
	return in.Metrics == MetricsAvailable && in.RequestsInRetention == nil && len(in.Replicas) > 0 && allowsZero(in.Variants)
}

// keepOffZero overrides a decision of zero for the whole group while
// requests wait at the gateway or within the wake grace of a variant the
// fast path woke: what runs keeps running, and a group at zero gets one
// replica of the woken (else the cheapest) variant.
func keepOffZero(in Input, variants []decision.Variant, targets []decision.Target) []decision.Target {
	if len(targets) == 0 || total(targets) > 0 {
		return targets
	}
	var why string
	woken := -1
	for i, v := range variants {
		if v.ScaledFromZeroAt.IsZero() || v.MaxReplicas < 1 {
			continue
		}
		since, grace := in.Now.Sub(v.ScaledFromZeroAt), WakeGrace(v)
		// A wake stamped slightly in the future (clock skew) counts as just
		// now; one beyond the grace is bogus and ignored.
		if since < grace && since > -grace && (woken < 0 || v.ScaledFromZeroAt.After(variants[woken].ScaledFromZeroAt)) {
			woken = i
			why = fmt.Sprintf("Scale-to-zero blocked: %s scaled from zero %s ago, within its wake grace of %s (start-up + metrics window)",
				v.Name, max(since, 0).Round(time.Second), grace)
		}
	}
	if in.SchedulerQueueSize > 0 {
		why = fmt.Sprintf("Scale-to-zero blocked: %g requests wait at the gateway", in.SchedulerQueueSize)
	}
	if why == "" {
		return targets
	}
	out := make([]decision.Target, len(variants))
	for i, v := range variants {
		out[i] = decision.Target{Variant: v.Name, Replicas: decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas), Rule: decision.RuleZeroBlocked, Reason: why}
	}
	if total(out) == 0 {
		pick := woken
		if pick < 0 {
			cheapest := cheapestName(variants)
			for i, v := range variants {
				if v.Name == cheapest {
					pick = i
				}
			}
		}
		if pick >= 0 && variants[pick].MaxReplicas >= 1 {
			out[pick].Replicas = 1
		}
	}
	return finish(out, variants)
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
			t.Reason = ReasonOptimizer
		}
		if t.Rule == "" {
			t.Rule = decision.RuleSteady
		}
		targets = append(targets, t)
	}
	switch {
	case RequestCountMissing(in):
		return holdCurrent(targets, variants)
	case idle(in) && allowsZero(variants) && firstRun(variants):
		return relabel(targets, variants, ReasonFirstRun+"; group idle")
	case idle(in) && allowsZero(variants) && in.ScaleToZero.Enabled:
		return setAll(variants, 0, decision.RuleScaleToZero, fmt.Sprintf("Scale-to-zero: no requests in retention period (%s)", in.ScaleToZero.RetentionPeriod))
	case idle(in) && allowsZero(variants):
		// Idle with scale to zero disabled: the minimal footprint is one
		// replica of the cheapest variant.
		return cheapestOnly(variants, fmt.Sprintf("Scale-to-zero disabled: no requests in retention period (%s), cheapest variant keeps 1 replica",
			in.ScaleToZero.RetentionPeriod))
	case allowsZero(variants) && !in.ScaleToZero.Enabled && total(targets) == 0:
		return keepCheapest(variants, targets, "Scale-to-zero disabled: cheapest variant keeps 1 replica")
	case allowsZero(variants) && total(targets) == 0:
		// The optimizer's zero waits for the retention period: only a
		// group idle over all of it goes to zero.
		return holdZero(in, variants)
	}
	if why := busy(in); why != "" && allowsZero(variants) && in.RequestsInRetention != nil && *in.RequestsInRetention <= 0 {
		// No request succeeded, yet there is load: say why the group is
		// not idle.
		for i := range targets {
			targets[i].Reason += "; not idle: " + why
		}
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
	retentionText := shortDuration(retention)
	if !allowsZero(variants) {
		targets := make([]decision.Target, 0, len(variants))
		for _, v := range variants {
			targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(v.MinReplicas, v.MinReplicas, v.MaxReplicas), Rule: decision.RuleRetention,
				Reason: fmt.Sprintf("Fallback: using minReplicas=%d after retention period (no metrics for >%s); last metrics %s ago", v.MinReplicas, retentionText, elapsed)})
		}
		return finish(targets, variants)
	}
	if in.ScaleToZero.Enabled {
		return setAll(variants, 0, decision.RuleRetention, fmt.Sprintf("Fallback: scale-to-zero after retention period (no metrics for >%s); last metrics %s ago", retentionText, elapsed))
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

// Reasons worded as upstream words them
// (docs/design.md#fallback-retention-and-last-resort); wva's detail follows
// after a semicolon.
const (
	ReasonOptimizer     = "Optimizer solution: cost and latency optimized allocation"
	ReasonFirstRun      = "First run: preserving current replicas for Prometheus discovery grace period"
	ReasonFallback      = "Fallback: preserving previous allocation (no optimizer solution)"
	reasonRetentionHold = "Optimizer returned 0 but retention period not exceeded (%s), preserving allocation"
)

// preserve holds the previous decision (or, on the first run, the current
// replica count), within bounds: the design note's fallback.
func preserve(variants []decision.Variant, rule decision.Rule, why string) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n := v.DesiredReplicas
		reason := fmt.Sprintf("%s; %s, previous %d", ReasonFallback, why, n)
		if v.LastUpdate.IsZero() {
			n = v.CurrentReplicas
			reason = fmt.Sprintf("%s; %s, first run, keeping current %d", ReasonFallback, why, n)
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(n, v.MinReplicas, v.MaxReplicas), Rule: rule, Reason: reason})
	}
	return finish(targets, variants)
}

// holdZero keeps the previous decision (the current replicas on a first
// run) when the optimizer returned 0 for a group not idle over the
// retention period.
func holdZero(in Input, variants []decision.Variant) []decision.Target {
	why := "request count unknown"
	switch b := busy(in); {
	case in.RequestsInRetention != nil && *in.RequestsInRetention > 0:
		why = fmt.Sprintf("%g requests in the last %s", *in.RequestsInRetention, shortDuration(in.ScaleToZero.RetentionPeriod.D()))
	case b != "":
		why = "not idle: " + b
	}
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n := v.DesiredReplicas
		reason := fmt.Sprintf(reasonRetentionHold+"; keeping %d", why, n)
		rule := decision.RuleRetentionHold
		if v.LastUpdate.IsZero() {
			n = v.CurrentReplicas
			reason = fmt.Sprintf("%s; optimizer returned 0 (%s), keeping current %d", ReasonFirstRun, why, n)
			rule = decision.RuleFirstRunGrace
		}
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: decision.Clamp(n, v.MinReplicas, v.MaxReplicas), Rule: rule, Reason: reason})
	}
	return finish(targets, variants)
}

// shortDuration writes d as the design note does: 5m, 1m30s, 1h.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// holdCurrent keeps every variant at no less than its current replicas
// while the request counter is missing: without it there is no evidence of
// idleness, and saturation may still ask for more.
func holdCurrent(targets []decision.Target, variants []decision.Variant) []decision.Target {
	for i, v := range variants {
		if n := decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas); targets[i].Replicas < n {
			targets[i].Replicas = n
			targets[i].Rule = decision.RuleRequestCountMissing
			targets[i].Reason = fmt.Sprintf("Holding current %d: pods are Ready but the request-count series (vllm:request_success_total) is missing, a scraping fault, not idleness", n)
		}
	}
	return finish(targets, variants)
}

// holdMissing keeps every variant at the larger of its current replicas
// and its previous decision (within bounds) while Ready pods report no
// series: a scale-up under way is not undone, and nothing goes to zero.
func holdMissing(variants []decision.Variant) []decision.Target {
	targets := make([]decision.Target, 0, len(variants))
	for _, v := range variants {
		n := decision.Clamp(max(v.CurrentReplicas, v.DesiredReplicas), v.MinReplicas, v.MaxReplicas)
		targets = append(targets, decision.Target{Variant: v.Name, Replicas: n, Rule: decision.RuleMetricsMissing,
			Reason: fmt.Sprintf("Holding %d: the group's pods are Ready but none reports vLLM metrics, a scraping fault, not idleness; no scale to zero", n)})
	}
	return finish(targets, variants)
}

// idle needs positive evidence: the request counter present and reading
// 0, no load on any reporting pod, and nothing waiting at the gateway.
func idle(in Input) bool {
	return in.RequestsInRetention != nil && *in.RequestsInRetention <= 0 && busy(in) == ""
}

// busy says what load the group carries outside its request count: requests
// at the gateway, queued in a pod, or holding a pod's KV cache; "" if none.
func busy(in Input) string {
	if in.SchedulerQueueSize > 0 {
		return fmt.Sprintf("%g requests wait at the gateway", in.SchedulerQueueSize)
	}
	for _, r := range in.Replicas {
		if r.QueueLength > 0 || r.KvCacheUsage > IdleKvCacheUsage {
			return fmt.Sprintf("pod %s has %g queued requests and KV cache usage %.3f", r.Pod, r.QueueLength, r.KvCacheUsage)
		}
	}
	return ""
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

// cheapestName is the variant woken first (decision.Cheaper).
func cheapestName(variants []decision.Variant) string {
	best := -1
	for i, v := range variants {
		if best < 0 || decision.Cheaper(v.Cost, v.Name, variants[best].Cost, variants[best].Name) {
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
