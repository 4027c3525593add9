package inventory

import (
	"errors"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
)

// ErrNotManaged: the object does not opt in (no llm-d.ai/managed="true"),
// or it is one wva (or KEDA, for a ScaledObject) created.
var ErrNotManaged = errors.New("not managed by annotations")

// OptInSource is what a variant takes from an opted-in object: its identity
// (Events go to Ref), its annotations and labels, its scale target and its
// replica bounds.
type OptInSource struct {
	Ref         corev1.ObjectReference
	Created     metav1.Time
	Labels      map[string]string
	Annotations map[string]string
	Target      llmdv1alpha1.CrossVersionObjectReference
	Min, Max    int32
	// Invalid, when set, is why the object's spec cannot make a variant.
	Invalid error
}

// The kinds that opt in, each with the annotation marking its in-memory VA.
var kinds = map[string]struct{ apiVersion, annotation string }{
	"HorizontalPodAutoscaler": {"autoscaling/v2", llmdv1alpha1.AnnotationFromHPA},
	"ScaledObject":            {llmdv1alpha1.ScaledObjectResource.GroupVersion().String(), llmdv1alpha1.AnnotationFromScaledObject},
}

// HPASource reads an HPA.
func HPASource(h *autoscalingv2.HorizontalPodAutoscaler) OptInSource {
	// The API server defaults minReplicas to 1; an HPA read from a fake or
	// an old object may still lack it.
	minReplicas := int32(1)
	if h.Spec.MinReplicas != nil {
		minReplicas = *h.Spec.MinReplicas
	}
	ref := h.Spec.ScaleTargetRef
	return OptInSource{
		Ref:     corev1.ObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Namespace: h.Namespace, Name: h.Name, UID: h.UID},
		Created: h.CreationTimestamp, Labels: h.Labels, Annotations: h.Annotations,
		Target: llmdv1alpha1.CrossVersionObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
		Min:    minReplicas, Max: h.Spec.MaxReplicas,
	}
}

// KEDA's defaults for a ScaledObject's replica bounds and target kind.
const (
	KEDADefaultMinReplicaCount = 0
	KEDADefaultMaxReplicaCount = 100
)

// ScaledObjectSource reads a keda.sh/v1alpha1 ScaledObject: its
// spec.scaleTargetRef (kind Deployment when empty, as KEDA reads it) and
// spec.minReplicaCount/maxReplicaCount with KEDA's defaults, 0 and 100.
func ScaledObjectSource(so *unstructured.Unstructured) OptInSource {
	s := OptInSource{
		Ref:     corev1.ObjectReference{APIVersion: so.GetAPIVersion(), Kind: "ScaledObject", Namespace: so.GetNamespace(), Name: so.GetName(), UID: so.GetUID()},
		Created: so.GetCreationTimestamp(), Labels: so.GetLabels(), Annotations: so.GetAnnotations(),
		Min: KEDADefaultMinReplicaCount, Max: KEDADefaultMaxReplicaCount,
	}
	if s.Ref.APIVersion == "" {
		s.Ref.APIVersion = kinds["ScaledObject"].apiVersion
	}
	var errs []error
	str := func(field string) string {
		v, _, err := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", field)
		errs = append(errs, err)
		return v
	}
	s.Target = llmdv1alpha1.CrossVersionObjectReference{APIVersion: str("apiVersion"), Kind: str("kind"), Name: str("name")}
	if s.Target.Kind == "" {
		s.Target.Kind = llmdv1alpha1.ScaleTargetKindDeployment
	}
	for field, into := range map[string]*int32{"minReplicaCount": &s.Min, "maxReplicaCount": &s.Max} {
		v, found, err := unstructured.NestedInt64(so.Object, "spec", field)
		errs = append(errs, err)
		if found && err == nil {
			*into = int32(v)
		}
	}
	s.Invalid = errors.Join(errs...)
	if s.Invalid == nil && s.Target.Name == "" {
		s.Invalid = errors.New("spec.scaleTargetRef.name is empty")
	}
	return s
}

// Managed reports whether the object opts in: llm-d.ai/managed="true", not
// created by wva for a VA, and not the HPA KEDA made for a ScaledObject.
func (s OptInSource) Managed() bool {
	return strings.EqualFold(s.Annotations[llmdv1alpha1.AnnotationManaged], "true") &&
		s.Labels[llmdv1alpha1.LabelManagedBy] != llmdv1alpha1.ManagedByWVA &&
		(s.Ref.Kind != "HorizontalPodAutoscaler" || s.Labels[llmdv1alpha1.LabelKEDAScaledObject] == "")
}

// Variant builds the in-memory VA for an opted-in object: same name,
// namespace and UID, the object's scale target and replica bounds, model,
// cost, GPUs per replica, scale-to-zero retention and role from the
// annotations. It returns ErrNotManaged for objects that
// do not opt in and a descriptive error for bad annotations or spec.
func (s OptInSource) Variant() (*llmdv1alpha1.VariantAutoscaling, error) {
	if !s.Managed() {
		return nil, ErrNotManaged
	}
	if s.Invalid != nil {
		return nil, s.Invalid
	}
	model := strings.TrimSpace(s.Annotations[llmdv1alpha1.AnnotationModelID])
	if model == "" {
		return nil, fmt.Errorf("%s=\"true\" needs annotation %s", llmdv1alpha1.AnnotationManaged, llmdv1alpha1.AnnotationModelID)
	}
	cost := strings.TrimSpace(s.Annotations[llmdv1alpha1.AnnotationVariantCost])
	if _, err := llmdv1alpha1.ParseVariantCost(cost); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", llmdv1alpha1.AnnotationVariantCost, err)
	}
	if cost == "" {
		cost = llmdv1alpha1.DefaultVariantCost
	}
	minReplicas := s.Min
	va := &llmdv1alpha1.VariantAutoscaling{
		TypeMeta: metav1.TypeMeta{APIVersion: llmdv1alpha1.SchemeGroupVersion.String(), Kind: "VariantAutoscaling"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Ref.Name, Namespace: s.Ref.Namespace, UID: s.Ref.UID, CreationTimestamp: s.Created,
			Annotations: map[string]string{kinds[s.Ref.Kind].annotation: s.Ref.Name}},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: s.Target,
			ModelID:        model,
			MinReplicas:    &minReplicas,
			MaxReplicas:    s.Max,
			VariantCost:    cost,
		},
	}
	// The optional annotations: any bad one rejects the object whole, so a
	// variant never runs on some of its settings.
	if v, ok := s.annotation(llmdv1alpha1.AnnotationGPUsPerReplica); ok {
		gpus, err := llmdv1alpha1.ParseGPUsPerReplica(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", llmdv1alpha1.AnnotationGPUsPerReplica, err)
		}
		va.Spec.GPUsPerReplica = &gpus
	}
	if v, ok := s.annotation(llmdv1alpha1.AnnotationScaleToZeroRetention); ok {
		d, err := llmdv1alpha1.ParseScaleToZeroRetention(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", llmdv1alpha1.AnnotationScaleToZeroRetention, err)
		}
		va.Spec.ScaleToZeroRetention = &metav1.Duration{Duration: d}
	}
	if v, ok := s.annotation(llmdv1alpha1.AnnotationRole); ok {
		role, err := parseRole(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", llmdv1alpha1.AnnotationRole, err)
		}
		va.Annotations[llmdv1alpha1.AnnotationRole] = string(role)
	}
	return va, nil
}

// annotation is an optional annotation's trimmed value; absent and blank
// are unset.
func (s OptInSource) annotation(key string) (string, bool) {
	v := strings.TrimSpace(s.Annotations[key])
	return v, v != ""
}

// parseRole reads the llm-d.ai/role annotation with the pod label's values
// (any case): unlike the label, where any other value means "both", an
// annotation set on purpose and misspelt is reported.
func parseRole(v string) (decision.Role, error) {
	switch r := decision.Role(strings.ToLower(v)); r {
	case decision.RolePrefill, decision.RoleDecode, decision.RoleBoth:
		return r, nil
	}
	return "", fmt.Errorf("invalid role %q: must be %q, %q or %q", v, decision.RolePrefill, decision.RoleDecode, decision.RoleBoth)
}

// RoleOverride is the role an opted-in object's llm-d.ai/role annotation
// gives its variant; false for a VA and for an object without it (the pod
// template's label decides).
func RoleOverride(va *llmdv1alpha1.VariantAutoscaling) (decision.Role, bool) {
	if !IsOptedIn(va) {
		return "", false
	}
	r, ok := va.Annotations[llmdv1alpha1.AnnotationRole]
	return decision.Role(r), ok
}

// FromHPA is HPASource(h).Variant().
func FromHPA(h *autoscalingv2.HorizontalPodAutoscaler) (*llmdv1alpha1.VariantAutoscaling, error) {
	return HPASource(h).Variant()
}

// FromScaledObject is ScaledObjectSource(so).Variant().
func FromScaledObject(so *unstructured.Unstructured) (*llmdv1alpha1.VariantAutoscaling, error) {
	return ScaledObjectSource(so).Variant()
}

// SourceOf is the object an in-memory VA was built from; false for a VA.
func SourceOf(va *llmdv1alpha1.VariantAutoscaling) (*corev1.ObjectReference, bool) {
	for kind, k := range kinds {
		if name, ok := va.Annotations[k.annotation]; ok {
			return &corev1.ObjectReference{APIVersion: k.apiVersion, Kind: kind, Namespace: va.Namespace, Name: name, UID: va.UID}, true
		}
	}
	return nil, false
}

// IsOptedIn reports whether va is an in-memory VA built from an opted-in
// HPA or ScaledObject.
func IsOptedIn(va *llmdv1alpha1.VariantAutoscaling) bool {
	_, ok := SourceOf(va)
	return ok
}
