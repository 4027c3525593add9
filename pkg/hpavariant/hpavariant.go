// Package hpavariant lets a user-owned autoscaling/v2 HPA opt in to wva by
// annotations, as upstream WVA v0.9 does (llm-d.ai/managed, llm-d.ai/model-id,
// llm-d.ai/variant-cost). Such an HPA becomes an in-memory
// VariantAutoscaling named after it, so the engine, the provider and the KEDA
// scaler treat it like any VA; its decisions live in a Memory instead of VA
// status, and wva never writes the HPA.
package hpavariant

import (
	"errors"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// ErrNotManaged: the HPA does not opt in (no llm-d.ai/managed="true"), or it
// is one wva created for a VA.
var ErrNotManaged = errors.New("HPA not managed by annotations")

// Managed reports whether the HPA opts in: llm-d.ai/managed="true" and not
// created by wva for a VA.
func Managed(h *autoscalingv2.HorizontalPodAutoscaler) bool {
	return strings.EqualFold(h.Annotations[llmdv1alpha1.AnnotationManaged], "true") &&
		h.Labels[llmdv1alpha1.LabelManagedBy] != llmdv1alpha1.ManagedByWVA
}

// FromHPA builds the in-memory VA for an opted-in HPA: same name, namespace
// and UID, the HPA's scaleTargetRef and replica bounds, model and cost from
// the annotations. It returns ErrNotManaged for HPAs that do not opt in and
// a descriptive error for bad annotations.
func FromHPA(h *autoscalingv2.HorizontalPodAutoscaler) (*llmdv1alpha1.VariantAutoscaling, error) {
	if !Managed(h) {
		return nil, ErrNotManaged
	}
	model := strings.TrimSpace(h.Annotations[llmdv1alpha1.AnnotationModelID])
	if model == "" {
		return nil, fmt.Errorf("%s=\"true\" needs annotation %s", llmdv1alpha1.AnnotationManaged, llmdv1alpha1.AnnotationModelID)
	}
	cost := strings.TrimSpace(h.Annotations[llmdv1alpha1.AnnotationVariantCost])
	if _, err := llmdv1alpha1.ParseVariantCost(cost); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", llmdv1alpha1.AnnotationVariantCost, err)
	}
	if cost == "" {
		cost = llmdv1alpha1.DefaultVariantCost
	}
	// The API server defaults minReplicas to 1; an HPA read from a fake or
	// an old object may still lack it.
	minReplicas := int32(1)
	if h.Spec.MinReplicas != nil {
		minReplicas = *h.Spec.MinReplicas
	}
	ref := h.Spec.ScaleTargetRef
	return &llmdv1alpha1.VariantAutoscaling{
		TypeMeta: metav1.TypeMeta{APIVersion: llmdv1alpha1.SchemeGroupVersion.String(), Kind: "VariantAutoscaling"},
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace, UID: h.UID, CreationTimestamp: h.CreationTimestamp,
			Annotations: map[string]string{llmdv1alpha1.AnnotationFromHPA: h.Name}},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
			ModelID:        model,
			MinReplicas:    &minReplicas,
			MaxReplicas:    h.Spec.MaxReplicas,
			VariantCost:    cost,
		},
	}, nil
}

// IsFromHPA reports whether va is an in-memory VA built by FromHPA.
func IsFromHPA(va *llmdv1alpha1.VariantAutoscaling) bool {
	_, ok := va.Annotations[llmdv1alpha1.AnnotationFromHPA]
	return ok
}
