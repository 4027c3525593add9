// Package saturation implements the percentage-based saturation analyzer
// (docs/design.md#percentage-based-saturation): it reads KV
// cache usage and queue length per replica and says whether the variant group
// needs one more replica, can safely lose one, or must hold because a
// previous decision is still being applied.
package saturation

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Name is the analyzer's name in configuration and decision reasons.
const Name = params.AnalyzerSaturationPercentage

// minNonSaturatedForScaleDown is the pre-condition of the N/(N-1) simulation:
// with a single non-saturated replica there is nothing to redistribute onto.
const minNonSaturatedForScaleDown = 2

// epsilon absorbs float rounding so a value exactly at a trigger compares as
// at the trigger (0.8-0.45 is not exactly 0.35 in binary).
const epsilon = 1e-9

// Analysis is the model-level saturation analysis.
type Analysis struct {
	TotalReplicas int     `json:"totalReplicas"`
	NonSaturated  int     `json:"nonSaturated"`
	AvgSpareKv    float64 `json:"avgSpareKv"`
	AvgSpareQueue float64 `json:"avgSpareQueue"`
	ShouldScaleUp bool    `json:"shouldScaleUp"`
	ScaleDownSafe bool    `json:"scaleDownSafe"`
	InTransition  bool    `json:"inTransition"`
	// Settling says why a scale-up the replicas ask for is withheld (see
	// Settling); "" when none is.
	Settling string `json:"settling,omitempty"`
	// Stuck are the variants in transition for longer than StuckAfter:
	// they no longer block the group, and the engine shows them on their
	// VAs (condition TransitionStuck, Event StuckTransition).
	Stuck []Stuck `json:"stuck,omitempty"`
	// Why explains the verdict in one sentence.
	Why string `json:"why"`
	// Roles, for a prefill/decode disaggregated group, is each role's own
	// analysis; the fields above then cover the whole group.
	Roles map[decision.Role]Analysis `json:"roles,omitempty"`
}

// Spare implements analyzer.SpareReporter.
func (a Analysis) Spare() (kv, queue float64) { return a.AvgSpareKv, a.AvgSpareQueue }

// StuckVariants implements analyzer.StuckReporter: variant name -> message.
func (a Analysis) StuckVariants() map[string]string {
	m := make(map[string]string, len(a.Stuck))
	for _, s := range a.Stuck {
		m[s.Variant] = s.Message()
	}
	return m
}

// Stuck is one variant stuck in transition.
type Stuck struct {
	Variant string `json:"variant"`
	// Since is the variant's last decision change, For how long ago that
	// was and Bound its StuckAfter.
	Since time.Time       `json:"since"`
	For   params.Duration `json:"for"`
	Bound params.Duration `json:"bound"`
	// Desired, Current, Reporting and Pending are the variant's decided
	// and spec replicas, its pods reporting metrics and its pods not Ready.
	Desired   int32 `json:"desired"`
	Current   int32 `json:"current"`
	Reporting int32 `json:"reporting"`
	Pending   int32 `json:"pending"`
}

// Message describes the stuck variant for a condition or an Event. It
// quotes the onset, not the age, so it stays the same cycle after cycle.
func (s Stuck) Message() string {
	return fmt.Sprintf("%s in transition since %s, longer than its bound %s (twice its start-up): desired %d, current %d, "+
		"%d of them reporting metrics, %d pods not Ready; it no longer blocks the model's other variants",
		s.Variant, s.Since.UTC().Format(time.RFC3339), s.Bound, s.Desired, s.Current, s.Reporting, s.Pending)
}

// StuckVariants lists the group's variants in transition for longer than
// StuckAfter, by name (none without a clock).
func StuckVariants(g decision.Group) []Stuck {
	var out []Stuck
	for _, v := range sortedVariants(g.Variants) {
		if transitioning(g, v) && stuck(v, g.Now) {
			out = append(out, Stuck{Variant: v.Name, Since: v.LastUpdate, For: params.Duration(g.Now.Sub(v.LastUpdate).Round(time.Second)), Bound: params.Duration(StuckAfter(v)),
				Desired: v.DesiredReplicas, Current: v.CurrentReplicas, Reporting: g.MetricsCount(v.Name), Pending: v.PendingReplicas})
		}
	}
	return out
}

// transitioning: a decision not yet applied, or pods not all reporting.
func transitioning(g decision.Group, v decision.Variant) bool {
	return (v.DesiredReplicas != 0 && v.DesiredReplicas != v.CurrentReplicas) || g.MetricsCount(v.Name) != v.CurrentReplicas
}

// IsSaturated says whether one replica is at or above either threshold.
func IsSaturated(r decision.ReplicaMetrics, cfg params.Scaling) bool {
	return r.KvCacheUsage >= cfg.KvCacheThreshold || r.QueueLength >= cfg.QueueLengthThreshold
}

// AnalyzeReplicas computes spare capacity over the non-saturated replicas and
// the scale-up and scale-down verdicts. It ignores transition state.
func AnalyzeReplicas(replicas []decision.ReplicaMetrics, cfg params.Scaling) Analysis {
	a := Analysis{TotalReplicas: len(replicas)}
	var sumSpareKv, sumSpareQueue float64
	for _, r := range replicas {
		if IsSaturated(r, cfg) {
			continue
		}
		a.NonSaturated++
		sumSpareKv += cfg.KvCacheThreshold - r.KvCacheUsage
		sumSpareQueue += cfg.QueueLengthThreshold - r.QueueLength
	}
	if a.NonSaturated == 0 {
		// No headroom anywhere (or no replica at all): more capacity is needed.
		a.ShouldScaleUp = true
		a.Why = fmt.Sprintf("all %d replicas saturated", a.TotalReplicas)
		if a.TotalReplicas == 0 {
			a.Why = "no replica reporting metrics"
		}
		return a
	}
	n := float64(a.NonSaturated)
	a.AvgSpareKv = sumSpareKv / n
	a.AvgSpareQueue = sumSpareQueue / n
	switch {
	case a.AvgSpareKv < cfg.KvSpareTrigger-epsilon:
		a.ShouldScaleUp = true
		a.Why = fmt.Sprintf("avg spare KV %.3f < trigger %.3f", a.AvgSpareKv, cfg.KvSpareTrigger)
	case a.AvgSpareQueue < cfg.QueueSpareTrigger-epsilon:
		a.ShouldScaleUp = true
		a.Why = fmt.Sprintf("avg spare queue %.2f < trigger %.2f", a.AvgSpareQueue, cfg.QueueSpareTrigger)
	}
	if a.ShouldScaleUp {
		return a
	}
	safe, why := scaleDownSafe(a, cfg)
	a.ScaleDownSafe = safe
	a.Why = why
	return a
}

// scaleDownSafe simulates removing one replica: the average load of the
// non-saturated replicas grows by N/(N-1) and must still leave spare capacity
// at or above both triggers.
func scaleDownSafe(a Analysis, cfg params.Scaling) (bool, string) {
	if a.NonSaturated < minNonSaturatedForScaleDown {
		return false, fmt.Sprintf("headroom ok (avg spare KV %.3f, queue %.2f); scale-down needs >= %d non-saturated replicas, have %d",
			a.AvgSpareKv, a.AvgSpareQueue, minNonSaturatedForScaleDown, a.NonSaturated)
	}
	n := float64(a.NonSaturated)
	factor := n / (n - 1)
	remainingKv := cfg.KvCacheThreshold - (cfg.KvCacheThreshold-a.AvgSpareKv)*factor
	remainingQueue := cfg.QueueLengthThreshold - (cfg.QueueLengthThreshold-a.AvgSpareQueue)*factor
	if remainingKv >= cfg.KvSpareTrigger-epsilon && remainingQueue >= cfg.QueueSpareTrigger-epsilon {
		return true, fmt.Sprintf("spare after removing one of %d: KV %.3f >= %.3f, queue %.2f >= %.2f",
			a.NonSaturated, remainingKv, cfg.KvSpareTrigger, remainingQueue, cfg.QueueSpareTrigger)
	}
	return false, fmt.Sprintf("headroom ok; scale-down unsafe: spare after removing one of %d would be KV %.3f (trigger %.3f), queue %.2f (trigger %.2f)",
		a.NonSaturated, remainingKv, cfg.KvSpareTrigger, remainingQueue, cfg.QueueSpareTrigger)
}

// StuckAfter is how long a variant may stay in transition before it stops
// blocking the group: twice its start-up (measured, else the start-up
// allowance, else DefaultStartup). One pod that never turns Ready (an
// unschedulable H100) must not freeze every other variant's scale-up.
func StuckAfter(v decision.Variant) time.Duration {
	switch {
	// Saturated: twice a huge allowance must not wrap negative.
	case v.StartupDelay > 0:
		return decision.MulDuration(v.StartupDelay, 2)
	case v.StartupAllowance > 0:
		return decision.MulDuration(v.StartupAllowance, 2)
	default:
		return 2 * DefaultStartup
	}
}

// DefaultStartup is the start-up assumed for a variant with neither a
// measured start-up nor a startup probe.
const DefaultStartup = 10 * time.Minute

// stuck reports whether the variant's last decision is older than
// StuckAfter (false when either time is unknown).
func stuck(v decision.Variant, now time.Time) bool {
	return !now.IsZero() && !v.LastUpdate.IsZero() && now.Sub(v.LastUpdate) > StuckAfter(v)
}

// Transition reports whether any variant of the group is still applying a
// decision (desired != 0 and != current) or has pods not yet reporting
// (metrics count != current). It returns the held target of every variant:
// desired for a desired/current mismatch, current otherwise. A variant in
// transition for longer than StuckAfter no longer blocks the others (it is
// named in the reason); upstream's blocking holds for ordinary transitions.
func Transition(g decision.Group) (bool, map[string]int32, string) {
	held := make(map[string]int32, len(g.Variants))
	inTransition := false
	var why string
	var stuckNotes []string
	note := func(s string) {
		if why == "" {
			why = s
		}
	}
	for _, v := range sortedVariants(g.Variants) {
		held[v.Name] = v.CurrentReplicas
		if transitioning(g, v) && stuck(v, g.Now) {
			stuckNotes = append(stuckNotes, fmt.Sprintf("%s in transition for %s > %s: not blocking", v.Name,
				g.Now.Sub(v.LastUpdate).Round(time.Second), StuckAfter(v)))
			continue
		}
		if v.DesiredReplicas != 0 && v.DesiredReplicas != v.CurrentReplicas {
			inTransition = true
			held[v.Name] = v.DesiredReplicas
			note(fmt.Sprintf("%s desired %d != current %d", v.Name, v.DesiredReplicas, v.CurrentReplicas))
		}
		if m := g.MetricsCount(v.Name); m != v.CurrentReplicas {
			inTransition = true
			note(fmt.Sprintf("%s has %d of %d replicas reporting metrics", v.Name, m, v.CurrentReplicas))
		}
	}
	if !inTransition && len(stuckNotes) > 0 {
		why = strings.Join(stuckNotes, "; ")
	}
	return inTransition, held, why
}

// Settling withholds a scale-up the group's newest replica already
// answers. For one metrics window after a replica turns Ready, the older
// replicas' max_over_time readings still hold the load from before it
// served, the peak that asked for it: judged on them, every adapter (a
// restarted one or a new leader as much as the one that decided the
// scale-up) would ask for one more. The replicas Ready for less than the
// window read only load served since; the scale-up stands when they ask
// for it too. Settling returns why the scale-up is withheld, "" when it
// stands: no Ready transition within the window (or no clock), or the
// fresh replicas short of headroom themselves. It reads only the pods'
// Ready times and their metrics, never what a process remembers.
func Settling(g decision.Group, cfg params.Scaling) string {
	recent, ok := decision.RecentlyReady(g, nil)
	if !ok {
		return ""
	}
	if len(recent.Replicas) == 0 {
		return recent.NoneReporting()
	}
	fa := AnalyzeReplicas(recent.Replicas, cfg)
	if fa.ShouldScaleUp {
		return ""
	}
	return fmt.Sprintf("%s; the replicas Ready within it (%d) have headroom (avg spare KV %.3f, queue %.2f), no scale-up",
		recent.Why(), len(recent.Replicas), fa.AvgSpareKv, fa.AvgSpareQueue)
}

// Analyzer is the percentage-based saturation analyzer.
type Analyzer struct{}

// Name implements the pipeline's analyzer seam.
func (Analyzer) Name() string { return Name }

// Analyze implements analyzer.Analyzer: the signal is in units of one
// replica and Details is an Analysis.
func (a Analyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	analysis, sig := a.analyze(g, cfg)
	return analyzer.Result{Signal: sig, Details: analysis}, nil
}

func (an Analyzer) analyze(g decision.Group, cfg params.Resolved) (Analysis, decision.Signal) {
	if parts := g.ByRole(); len(parts) > 1 {
		return an.analyzeRoles(g, parts, cfg)
	}
	a := AnalyzeReplicas(g.Replicas, cfg.Scaling)
	sig := decision.Signal{Analyzer: Name, Priority: cfg.Scaling.Priority}
	inTransition, held, why := Transition(g)
	a.Stuck = StuckVariants(g)
	if inTransition {
		a.InTransition = true
		sig.Hold = true
		sig.HeldTargets = held
		sig.Reason = "model in transition (" + why + "), no new decision"
		return a, sig
	}
	settling := ""
	if a.ShouldScaleUp {
		settling = Settling(g, cfg.Scaling)
	}
	switch {
	case settling != "":
		a.Settling = settling
		sig.Reason = "settling: " + settling
	case a.ShouldScaleUp:
		sig.RequiredCapacity = 1
		sig.Reason = "saturation: " + a.Why
	case a.ScaleDownSafe:
		sig.SpareCapacity = 1
		sig.Reason = "spare capacity: " + a.Why
	default:
		sig.Reason = "steady: " + a.Why
	}
	if why != "" {
		// A stuck variant no longer blocks: say so.
		sig.Reason += " (" + why + ")"
	}
	return a, sig
}

func sortedVariants(vs []decision.Variant) []decision.Variant {
	out := append([]decision.Variant(nil), vs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
