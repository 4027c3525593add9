package fleet

import (
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/controller"
)

// RatePolicy is one HPA scaling policy: at most Value pods (or Value
// percent of the replicas at the start of the period) per Period.
type RatePolicy struct {
	Percent bool
	Value   int32
	Period  time.Duration
}

// HPABehavior is the part of autoscaling/v2 behavior the emulation follows
// (selectPolicy Max in both directions).
type HPABehavior struct {
	UpTolerance, DownTolerance         float64
	UpStabilization, DownStabilization time.Duration
	UpPolicies, DownPolicies           []RatePolicy
}

// WVAControllerBehavior is what `wva controller` puts on the HPAs it owns
// on a cluster that keeps HPA tolerances (1.37): controller.BehaviorFor a VA
// without a behavior annotation, so the simulated HPAs follow the shipped
// default. Today that is tolerance 0, scale up at once by up to
// max(100 pods, 100%) per 15 s, scale down after a 30 s stabilization
// window by up to 100% per 15 s.
func WVAControllerBehavior() HPABehavior {
	b, err := controller.BehaviorFor(&llmdv1alpha1.VariantAutoscaling{}, controller.Capabilities{Tolerance: true})
	if err == nil {
		var out HPABehavior
		if out, err = BehaviorFromAPI(b); err == nil {
			return out
		}
	}
	// Only a behavior annotation can make BehaviorFor fail, and the default
	// selects Max: a failure here is a defect of the default.
	panic(fmt.Sprintf("the controller's default HPA behavior cannot be emulated: %v", err))
}

// BehaviorFromAPI is the emulation of an autoscaling/v2 behavior: rules
// absent or fields unset take the API's defaults (tolerance 0.1, no
// stabilization up and 300 s down, max(4 pods, 100%) up and 100% down per
// 15 s). Only selectPolicy Max (the default) is emulated.
func BehaviorFromAPI(b *autoscalingv2.HorizontalPodAutoscalerBehavior) (HPABehavior, error) {
	def := DefaultHPABehavior()
	var out HPABehavior
	var err error
	if b == nil {
		b = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	}
	if out.UpTolerance, out.UpStabilization, out.UpPolicies, err = rulesFromAPI(b.ScaleUp, def.UpTolerance, def.UpStabilization, def.UpPolicies); err != nil {
		return HPABehavior{}, fmt.Errorf("scaleUp: %w", err)
	}
	if out.DownTolerance, out.DownStabilization, out.DownPolicies, err = rulesFromAPI(b.ScaleDown, def.DownTolerance, def.DownStabilization, def.DownPolicies); err != nil {
		return HPABehavior{}, fmt.Errorf("scaleDown: %w", err)
	}
	return out, nil
}

func rulesFromAPI(r *autoscalingv2.HPAScalingRules, tolerance float64, window time.Duration, policies []RatePolicy) (float64, time.Duration, []RatePolicy, error) {
	if r == nil {
		return tolerance, window, policies, nil
	}
	if r.SelectPolicy != nil && *r.SelectPolicy != autoscalingv2.MaxChangePolicySelect {
		return 0, 0, nil, fmt.Errorf("selectPolicy %s: only %s is emulated", *r.SelectPolicy, autoscalingv2.MaxChangePolicySelect)
	}
	if r.Tolerance != nil {
		tolerance = r.Tolerance.AsApproximateFloat64()
	}
	if r.StabilizationWindowSeconds != nil {
		window = time.Duration(*r.StabilizationWindowSeconds) * time.Second
	}
	if len(r.Policies) > 0 {
		policies = nil
		for _, p := range r.Policies {
			policies = append(policies, RatePolicy{Percent: p.Type == autoscalingv2.PercentScalingPolicy, Value: p.Value, Period: time.Duration(p.PeriodSeconds) * time.Second})
		}
	}
	return tolerance, window, policies, nil
}

// DefaultHPABehavior is a stock HPA's (what KEDA creates unless told
// otherwise): tolerance 0.1, scale up by max(4 pods, 100%) per 15 s, scale
// down after a 300 s stabilization window by up to 100% per 15 s.
func DefaultHPABehavior() HPABehavior {
	return HPABehavior{
		UpTolerance: 0.1, DownTolerance: 0.1,
		UpPolicies:        []RatePolicy{{Value: 4, Period: 15 * time.Second}, {Percent: true, Value: 100, Period: 15 * time.Second}},
		DownStabilization: 300 * time.Second,
		DownPolicies:      []RatePolicy{{Percent: true, Value: 100, Period: 15 * time.Second}},
	}
}

type timedRecommendation struct {
	at       time.Duration
	replicas int32
}

type scaleEvent struct {
	at     time.Duration
	change int32 // > 0 up, < 0 down
}

// HPA emulates the Kubernetes horizontal pod autoscaler for one scale
// target with one External metric of target type AverageValue
// (pkg/controller/podautoscaler: replica_calculator.go and horizontal.go).
type HPA struct {
	Behavior HPABehavior
	Min, Max int32
	recs     []timedRecommendation
	events   []scaleEvent
	// scaledToZero is the ScaledToZero condition: the HPA itself took the
	// target to 0 and may bring it back; a target someone else scaled to 0
	// disables the HPA (ScalingActive=False) until it has a replica.
	scaledToZero bool
}

// Sync is one HPA reconcile at now: current is the target's spec.replicas,
// usage the sum of the metric's items and target the AverageValue. ok=false
// means the metric could not be read: the HPA keeps the replicas. It returns
// the replica count the HPA sets.
func (h *HPA) Sync(now time.Duration, current int32, usage, target float64, ok bool) int32 {
	if current > 0 {
		h.scaledToZero = false
	}
	if !ok || target <= 0 {
		return current
	}
	if current == 0 && (h.Min > 0 || !h.scaledToZero) {
		return current
	}
	if len(h.recs) == 0 && h.Behavior.DownStabilization > 0 {
		// The window starts full of the current count, so the first sync
		// cannot scale down (maybeInitScaleDownStabilizationWindow).
		h.recs = append(h.recs, timedRecommendation{at: now, replicas: current})
	}
	proposal := current
	if current == 0 {
		proposal = int32(math.Ceil(usage/target - 1e-9))
	} else {
		ratio := usage / (target * float64(current))
		if ratio < 1-h.Behavior.DownTolerance || ratio > 1+h.Behavior.UpTolerance {
			proposal = int32(math.Ceil(usage/target - 1e-9))
		}
	}
	desired := h.stabilize(now, current, proposal)
	desired = h.rateLimit(now, current, desired)
	if desired != current {
		h.events = append(h.events, scaleEvent{at: now, change: desired - current})
	}
	if desired == 0 {
		h.scaledToZero = true
	}
	return desired
}

// stabilize records the proposal and applies the windows: a scale up goes
// to the lowest proposal of the up window, a scale down to the highest of
// the down window (stabilizeRecommendationWithBehaviors).
func (h *HPA) stabilize(now time.Duration, current, proposal int32) int32 {
	up, down := proposal, proposal
	keep := h.recs[:0]
	horizon := max(h.Behavior.UpStabilization, h.Behavior.DownStabilization)
	for _, r := range h.recs {
		if now-r.at > horizon {
			continue
		}
		keep = append(keep, r)
		if now-r.at < h.Behavior.UpStabilization {
			up = min(up, r.replicas)
		}
		if now-r.at < h.Behavior.DownStabilization {
			down = max(down, r.replicas)
		}
	}
	h.recs = append(keep, timedRecommendation{at: now, replicas: proposal})
	out := current
	if out < up {
		out = up
	}
	if out > down {
		out = down
	}
	return out
}

// rateLimit applies the scaling policies (selectPolicy Max: the policy
// allowing the largest change wins) and the min/max bounds
// (convertDesiredReplicasWithBehaviorRate).
func (h *HPA) rateLimit(now time.Duration, current, desired int32) int32 {
	switch {
	case desired > current:
		limit := int32(math.MinInt32)
		for _, p := range h.Behavior.UpPolicies {
			start := current - h.changeSince(now-p.Period, +1)
			var l int32
			if p.Percent {
				l = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
			} else {
				l = start + p.Value
			}
			limit = max(limit, l)
		}
		if len(h.Behavior.UpPolicies) > 0 {
			desired = min(desired, limit)
		}
	case desired < current:
		limit := int32(math.MaxInt32)
		for _, p := range h.Behavior.DownPolicies {
			start := current + h.changeSince(now-p.Period, -1)
			var l int32
			if p.Percent {
				l = int32(float64(start) * (1 - float64(p.Value)/100))
			} else {
				l = start - p.Value
			}
			limit = min(limit, l)
		}
		if len(h.Behavior.DownPolicies) > 0 {
			desired = max(desired, limit)
		}
	}
	return min(max(desired, h.Min), h.Max)
}

// changeSince sums the scale events of one direction after since, as a
// positive number.
func (h *HPA) changeSince(since time.Duration, sign int32) int32 {
	var sum int32
	keep := h.events[:0]
	for _, e := range h.events {
		if since-e.at > 10*time.Minute {
			continue // far outside any period
		}
		keep = append(keep, e)
		if e.at > since && e.change*sign > 0 {
			sum += e.change * sign
		}
	}
	h.events = keep
	return sum
}
