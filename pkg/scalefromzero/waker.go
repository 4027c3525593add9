package scalefromzero

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/wva-project/wva/pkg/budget"
)

// Event reasons recorded on VAs.
const (
	EventScaledFromZero = "ScaledFromZero"
	EventBlocked        = "ScaleFromZeroBlocked"
	EventFailed         = "ScaleFromZeroFailed"
)

// Outcome of one Wake call.
type Outcome struct {
	Result Result
	// Variant woken (or being woken) when Result is ResultScaled.
	Variant string
	// Blockers when Result is ResultBlocked.
	Blockers []budget.Holder
	// Quotas: namespace quotas that refused a variant (ResultBlocked).
	Quotas []budget.Quota
	// Message says why, for logs and HTTP answers.
	Message string
	// Repeated: the group was already handled and the outcome is the
	// remembered one (no new API call was made).
	Repeated bool
	// Active: the group is not at zero (nothing to do).
	Active bool
}

// pending is a group the waker acted on recently: one wake-up per group
// until its target shows a replica or the wait runs out.
type pending struct {
	outcome Outcome
	varKey  string // "namespace/name" of the woken VA
	// targetRV is the woken target's resourceVersion the scale call was
	// conditional on.
	targetRV string
	until    time.Time
}

// Waker decides and performs wake-ups, one per group at a time.
type Waker struct {
	State  StateSource
	Scaler Scaler
	// Marker writes the wake marker before each scale call (nil: none).
	Marker   Marker
	Recorder record.EventRecorder
	Metrics  *Metrics
	Clock    clock.PassiveClock
	// Budgeted: a budget is configured, so decisions read pool usage.
	Budgeted bool
	// Unbudgeted is --unbudgeted-variants ("" = unlimited).
	Unbudgeted budget.Unbudgeted
	// WakeTimeout: how long a woken group is left alone before it may be
	// woken again if its target still shows zero.
	WakeTimeout time.Duration
	// RetryAfter: how long a blocked or failed group waits before the
	// next attempt.
	RetryAfter time.Duration

	// mu serializes wake-ups: two groups sharing a pool must not both
	// take its last GPUs, and a decision is a few cache reads plus one
	// API call.
	mu         sync.Mutex
	pending    map[GroupKey]*pending
	lastBlock  map[GroupKey]string
	blockEvent map[GroupKey]time.Time
}

// blockEventEvery bounds how often an unchanged "blocked" Event repeats.
const blockEventEvery = time.Minute

// Wake handles queued requests seen at `seen` for a group: if the group is
// at zero and not already being woken, it scales the chosen variant to one.
func (w *Waker) Wake(ctx context.Context, key GroupKey, seen time.Time) Outcome {
	w.mu.Lock()
	if w.pending == nil {
		w.pending, w.lastBlock, w.blockEvent = map[GroupKey]*pending{}, map[GroupKey]string{}, map[GroupKey]time.Time{}
	}
	now := w.Clock.Now()
	if p := w.pending[key]; p != nil && now.Before(p.until) {
		w.mu.Unlock()
		o := p.outcome
		o.Repeated = true
		return o
	}
	snap, err := w.State.Snapshot(w.Budgeted, w.reservedLocked())
	if err != nil {
		w.mu.Unlock()
		klog.ErrorS(err, "reading state for a wake-up", "group", key)
		return Outcome{Result: ResultError, Message: err.Error()}
	}
	g, ok := snap.Groups[key]
	if !ok {
		w.mu.Unlock()
		return Outcome{Result: ResultNoVariant, Message: fmt.Sprintf("no VariantAutoscaling with a resolvable target serves model %q in namespace %q", key.ModelID, key.Namespace)}
	}
	if !g.AtZero() {
		w.mu.Unlock()
		return Outcome{Active: true, Message: "group is not at zero"}
	}
	policy := w.Unbudgeted
	if policy == "" {
		policy = budget.UnbudgetedUnlimited
	}
	d := Choose(g, snap.Ledger(policy))
	switch d.Result {
	case ResultScaled:
		return w.scale(ctx, key, d, seen) // unlocks
	case ResultBlocked:
		o := w.blocked(key, g, d, now)
		w.mu.Unlock()
		return o
	default:
		w.mu.Unlock()
		w.Metrics.Decisions.WithLabelValues(string(d.Result)).Inc()
		return Outcome{Result: d.Result}
	}
}

// scale is called with w.mu held and releases it before the follow-ups
// (Event, taking back a mark) that the latency does not wait for. The wake
// marker is written first: without it the scale is not sent, so no reader
// sees the woken replica with a decision of zero that predates the wake.
func (w *Waker) scale(ctx context.Context, key GroupKey, d Decision, seen time.Time) Outcome {
	v := d.Variant
	varKey := v.VA.Namespace + "/" + v.Name
	var mark *Mark
	var err error
	scaled := false
	if w.Marker != nil {
		var mk Mark
		if mk, err = w.Marker.Mark(ctx, v.VA, w.Clock.Now()); err == nil {
			mark = &mk
		}
	}
	if err == nil {
		scaled, err = w.Scaler.ScaleFromZero(ctx, v.Target)
	}
	accepted := w.Clock.Now()
	var o Outcome
	switch {
	case err != nil:
		o = Outcome{Result: ResultError, Variant: v.Name, Message: err.Error()}
		w.pending[key] = &pending{outcome: o, until: accepted.Add(w.RetryAfter)}
	case !scaled:
		o = Outcome{Result: ResultAlreadyScaled, Variant: v.Name, Message: fmt.Sprintf("%s already had replicas", v.Target)}
		w.pending[key] = &pending{outcome: Outcome{Result: ResultScaled, Variant: v.Name}, varKey: varKey, targetRV: v.Target.ResourceVersion, until: accepted.Add(w.WakeTimeout)}
	default:
		o = Outcome{Result: ResultScaled, Variant: v.Name}
		w.pending[key] = &pending{outcome: o, varKey: varKey, targetRV: v.Target.ResourceVersion, until: accepted.Add(w.WakeTimeout)}
		w.Metrics.Latency.Observe(accepted.Sub(seen).Seconds())
		w.clearBlockedLocked(key)
	}
	w.mu.Unlock()
	w.Metrics.Decisions.WithLabelValues(string(o.Result)).Inc()

	if mark != nil && !scaled {
		// No wake happened: a marker left behind would hold the group up
		// for a wake grace (the bound if this fails too).
		if uerr := w.Marker.Unmark(ctx, *mark); uerr != nil {
			klog.ErrorS(uerr, "taking back the scaled-from-zero annotation; the engine's wake grace bounds it", "va", varKey)
		}
	}
	if err != nil {
		klog.ErrorS(err, "scale from zero failed; retrying later", "group", key, "variant", varKey, "retryAfter", w.RetryAfter)
		w.Recorder.Eventf(v.VA, corev1.EventTypeWarning, EventFailed, "Requests are queued for model %s but scaling %s to 1 failed: %v", key.ModelID, v.Target, err)
		return o
	}
	if !scaled {
		klog.InfoS("target already has replicas; nothing to do", "group", key, "target", v.Target.String())
		return o
	}
	latency := accepted.Sub(seen)
	skipped := ""
	if len(d.Skipped) > 0 {
		parts := make([]string, 0, len(d.Skipped))
		for _, s := range d.Skipped {
			parts = append(parts, s.String())
		}
		skipped = "; cheaper variants skipped: " + strings.Join(parts, "; ")
	}
	klog.InfoS("scaled from zero", "group", key, "variant", varKey, "target", v.Target.String(), "latency", latency, "skipped", len(d.Skipped))
	w.Recorder.Eventf(v.VA, corev1.EventTypeNormal, EventScaledFromZero,
		"Requests are queued for model %s: scaled %s from 0 to 1 (cost %g, %s after the queue was seen)%s", key.ModelID, v.Target, v.Cost, latency.Round(time.Millisecond), skipped)
	return o
}

// blocked records a budget refusal; called with w.mu held.
func (w *Waker) blocked(key GroupKey, g Group, d Decision, now time.Time) Outcome {
	reasons := make([]string, 0, len(d.Skipped))
	for _, s := range d.Skipped {
		reasons = append(reasons, s.String())
	}
	// Each reason names the pool's holders with their models, or the quota.
	msg := fmt.Sprintf("GPU budget forbids waking model %s: %s", key.ModelID, strings.Join(reasons, "; "))
	o := Outcome{Result: ResultBlocked, Blockers: d.Blockers, Quotas: d.Quotas, Message: msg}
	w.pending[key] = &pending{outcome: o, until: now.Add(w.RetryAfter)}
	w.Metrics.Decisions.WithLabelValues(string(ResultBlocked)).Inc()
	w.Metrics.BudgetBlocked.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "model_id": key.ModelID})
	for _, h := range d.Blockers {
		w.Metrics.BudgetBlocked.WithLabelValues(key.Namespace, key.ModelID, h.Name).Set(float64(h.GPUs))
	}
	// Retries come every RetryAfter: repeat the Event only when the
	// picture changes, or once a minute.
	if w.lastBlock[key] != msg || now.Sub(w.blockEvent[key]) >= blockEventEvery {
		w.lastBlock[key], w.blockEvent[key] = msg, now
		cheapest := g.WakeOrder()[0]
		klog.InfoS("scale from zero blocked by the GPU budget", "group", key, "blockers", HolderNames(d.Blockers))
		w.Recorder.Event(cheapest.VA, corev1.EventTypeWarning, EventBlocked, msg)
	}
	return o
}

func (w *Waker) clearBlockedLocked(key GroupKey) {
	delete(w.lastBlock, key)
	delete(w.blockEvent, key)
	w.Metrics.BudgetBlocked.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "model_id": key.ModelID})
}

// reservedLocked: variants scaled up whose informer copy may still say 0.
func (w *Waker) reservedLocked() map[string]bool {
	out := map[string]bool{}
	for _, p := range w.pending {
		if p.varKey != "" {
			out[p.varKey] = true
		}
	}
	return out
}

// Sync forgets groups that left zero (their wake-up worked, or someone
// else scaled them) or disappeared, and wake-ups whose wait ran out, so
// they can be woken again. zero is every group now at zero.
//
// A woken group also counts as handled once the informer shows its target
// at a newer version than the one the conditional scale call was made
// against: every newer version comes after that call, so a target back at
// zero was scaled down again and may be woken again, even when no tick saw
// the replica in between.
func (w *Waker) Sync(zero []Group) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.Clock.Now()
	atZero := make(map[GroupKey]Group, len(zero))
	for _, g := range zero {
		atZero[g.Key] = g
	}
	for key, p := range w.pending {
		g, still := atZero[key]
		switch {
		case !still:
			delete(w.pending, key)
			w.clearBlockedLocked(key)
		case p.varKey != "" && targetMoved(g, p):
			delete(w.pending, key)
		case !now.Before(p.until):
			if p.varKey != "" {
				klog.InfoS("woken target still shows 0 replicas after the wake timeout; will wake again if requests are queued",
					"group", key, "variant", p.varKey, "wakeTimeout", w.WakeTimeout)
			}
			delete(w.pending, key)
		}
	}
	for key := range w.lastBlock {
		if _, still := atZero[key]; !still {
			w.clearBlockedLocked(key)
		}
	}
}

func targetMoved(g Group, p *pending) bool {
	for _, v := range g.Variants {
		if v.VA.Namespace+"/"+v.Name == p.varKey {
			return v.Target.ResourceVersion != p.targetRV
		}
	}
	return true // the woken variant left the group
}

// WakeModel wakes every group at zero serving modelID (the activator's
// entry point; it does not know namespaces).
func (w *Waker) WakeModel(ctx context.Context, modelID string, seen time.Time) []Outcome {
	snap, err := w.State.Snapshot(false, nil)
	if err != nil {
		return []Outcome{{Result: ResultError, Message: err.Error()}}
	}
	var out []Outcome
	for _, g := range snap.ZeroGroups() {
		if g.Key.ModelID == modelID {
			out = append(out, w.Wake(ctx, g.Key, seen))
		}
	}
	return out
}
