// Package controller is `wva controller`: it keeps one autoscaling/v2 HPA
// per VariantAutoscaling aligned with the VA and the adapter's metric, and
// does what a stock HPA cannot (scale to and from zero where the cluster's
// HPA can't, follow in-band decisions where tolerance is not configurable).
package controller

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Capabilities are what the cluster's HPA supports, probed at start.
type Capabilities struct {
	// Tolerance: spec.behavior.scale{Up,Down}.tolerance is kept
	// (HPAConfigurableTolerance; GA in 1.37).
	Tolerance bool
	// ScaleToZero: minReplicas 0 is accepted (HPAScaleToZero; beta, on by
	// default in 1.37). The HPA then scales to and from zero by itself.
	ScaleToZero bool
}

// DefaultBehavior suits GPU workloads: scale up at once to what wva decided
// (the adapter already waits for pending replicas), scale down after a short
// window (the adapter already simulated that removal is safe).
func DefaultBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 100, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](30),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		},
	}
}

// BehaviorFor is the VA's behavior: the annotation when present and valid,
// else the default. Zero tolerance is added where supported so the HPA
// follows the decision exactly (20 -> 21 included).
func BehaviorFor(va *llmdv1alpha1.VariantAutoscaling, caps Capabilities) (*autoscalingv2.HorizontalPodAutoscalerBehavior, error) {
	b := DefaultBehavior()
	var err error
	if raw, ok := va.Annotations[llmdv1alpha1.AnnotationHPABehavior]; ok {
		var custom autoscalingv2.HorizontalPodAutoscalerBehavior
		if perr := yamlOrJSON(raw, &custom); perr != nil {
			err = fmt.Errorf("annotation %s: %w; using the default behavior", llmdv1alpha1.AnnotationHPABehavior, perr)
		} else {
			if custom.ScaleUp != nil {
				b.ScaleUp = custom.ScaleUp
			}
			if custom.ScaleDown != nil {
				b.ScaleDown = custom.ScaleDown
			}
		}
	}
	if caps.Tolerance {
		zero := resource.MustParse("0")
		for _, r := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
			if r.Tolerance == nil {
				r.Tolerance = ptr.To(zero)
			}
		}
	} else {
		b.ScaleUp.Tolerance, b.ScaleDown.Tolerance = nil, nil
	}
	return b, err
}

// MinReplicas is the HPA's minimum: the VA's, except that 0 needs the
// HPAScaleToZero gate; without it the HPA stays at >= 1 and the controller
// owns 0 <-> 1.
func MinReplicas(va *llmdv1alpha1.VariantAutoscaling, caps Capabilities) int32 {
	min := va.MinReplicasOrDefault()
	if min < 1 && !caps.ScaleToZero {
		return 1
	}
	return min
}

// DesiredHPA builds the HPA for a VA. Pure: the same VA and capabilities
// always give the same HPA, so comparing it with the live one detects drift.
func DesiredHPA(va *llmdv1alpha1.VariantAutoscaling, caps Capabilities) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	behavior, err := BehaviorFor(va, caps)
	ref := va.Spec.ScaleTargetRef
	apiVersion := ref.APIVersion
	if gvk, gerr := ref.GroupVersionKind(); gerr == nil && apiVersion == "" {
		apiVersion = gvk.GroupVersion().String()
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name:            va.Name,
			Namespace:       va.Namespace,
			Labels:          map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA, llmdv1alpha1.LabelVariantAutoscaling: va.Name},
			OwnerReferences: []metav1.OwnerReference{vaOwnerRef(va)},
		},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: ref.Kind, Name: ref.Name},
			MinReplicas:    ptr.To(MinReplicas(va, caps)),
			MaxReplicas:    va.MaxReplicasOrDefault(),
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ExternalMetricSourceType,
				External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{
						Name:     llmdv1alpha1.MetricDesiredReplicas,
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{llmdv1alpha1.MetricLabelVariantName: va.Name}},
					},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))},
				},
			}},
			Behavior: behavior,
		},
	}
	return hpa, err
}

// InSync says whether the live HPA already has everything DesiredHPA sets.
// desired is compared in the form the API server stores it (its defaults
// filled in, see defaultedSpec), with semantic equality (quantities, nil vs
// empty): otherwise a behavior annotation that leaves fields out would make
// every reconcile send a no-op update.
func InSync(live, desired *autoscalingv2.HorizontalPodAutoscaler) bool {
	return labelsInclude(live, desired) && equality.Semantic.DeepEqual(live.Spec, defaultedSpec(desired.Spec)) &&
		ownedBy(live, desired.OwnerReferences[0].UID)
}

// defaultedSpec is spec as the API server stores it: a copy with
// autoscaling/v2 defaulting applied, as upstream's
// SetDefaults_HorizontalPodAutoscaler does (k8s.io/kubernetes
// pkg/apis/autoscaling/v2/defaults.go, not a dependency of wva). Its
// metrics default (CPU utilization when none are set) is left out:
// DesiredHPA always sets one metric.
func defaultedSpec(spec autoscalingv2.HorizontalPodAutoscalerSpec) autoscalingv2.HorizontalPodAutoscalerSpec {
	out := *spec.DeepCopy()
	if out.MinReplicas == nil {
		out.MinReplicas = ptr.To[int32](1)
	}
	// SetDefaults_HorizontalPodAutoscalerBehavior: a behavior, once set, gets
	// both directions with every unset field from the direction's defaults.
	if out.Behavior != nil {
		out.Behavior.ScaleUp = defaultedRules(out.Behavior.ScaleUp, upstreamScaleUpRules())
		out.Behavior.ScaleDown = defaultedRules(out.Behavior.ScaleDown, upstreamScaleDownRules())
	}
	return out
}

// upstreamScaleUpRules is upstream's defaultHPAScaleUpRules: no
// stabilization, the larger of 4 Pods and 100% per 15 s.
func upstreamScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// upstreamScaleDownRules is upstream's defaultHPAScaleDownRules: 100% per
// 15 s. The stabilization window stays unset (the controller manager's
// --horizontal-pod-autoscaler-downscale-stabilization applies).
func upstreamScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:     []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
}

// defaultedRules is upstream's copyHPAScalingRules: every non-nil field of
// from over defaults (a nil from is all defaults).
func defaultedRules(from, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return defaults
	}
	if from.SelectPolicy != nil {
		defaults.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		defaults.Policies = from.Policies
	}
	if from.Tolerance != nil {
		defaults.Tolerance = from.Tolerance
	}
	return defaults
}

// Apply copies the wva-owned fields of desired onto live, keeping other
// labels, annotations and the status.
func Apply(live, desired *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := live.DeepCopy()
	applyMeta(out, desired)
	out.Spec = desired.Spec
	return out
}

// vaOwnerRef makes the VA the controller of an object wva creates for it,
// so the garbage collector removes the object with the VA.
func vaOwnerRef(va *llmdv1alpha1.VariantAutoscaling) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: llmdv1alpha1.SchemeGroupVersion.String(), Kind: llmdv1alpha1.VariantAutoscalingKind,
		Name: va.Name, UID: va.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// labelsInclude says whether live carries every label of desired.
func labelsInclude(live, desired metav1.Object) bool {
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

// applyMeta adds desired's labels to out and makes desired's controller
// reference the only one, keeping other owner references.
func applyMeta(out, desired metav1.Object) {
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	out.SetLabels(labels)
	refs := []metav1.OwnerReference{desired.GetOwnerReferences()[0]}
	for _, r := range out.GetOwnerReferences() {
		if r.Controller == nil || !*r.Controller {
			refs = append(refs, r)
		}
	}
	out.SetOwnerReferences(refs)
}

// ownedBy says whether obj's controller reference is the VA with uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller && r.UID == uid {
			return true
		}
	}
	return false
}

// yamlOrJSON decodes strictly: a typo in the annotation is an error, not a
// silently ignored field.
func yamlOrJSON(raw string, into any) error {
	return yaml.UnmarshalStrict([]byte(raw), into)
}
