package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Output is what `wva controller` keeps per VA.
type Output string

// Outputs (--output).
const (
	OutputHPA          Output = "hpa"
	OutputScaledObject Output = "scaledobject"
)

func (c *Controller) syncScaledObject(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, desired *unstructured.Unstructured, st *status) error {
	sos := c.Dynamic.Resource(ScaledObjectGVR).Namespace(va.Namespace)
	min, _, _ := unstructured.NestedInt64(desired.Object, "spec", "minReplicaCount")
	max, _, _ := unstructured.NestedInt64(desired.Object, "spec", "maxReplicaCount")
	return syncKept(ctx, c, va, kept[*unstructured.Unstructured]{
		kind: "ScaledObject", conflict: llmdv1alpha1.ReasonScaledObjectConflict,
		get: func(ns, name string) (*unstructured.Unstructured, error) {
			obj, err := c.ScaledObjects.ByNamespace(ns).Get(name)
			if err != nil {
				return nil, err
			}
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil, fmt.Errorf("ScaledObject %s/%s: cache holds %T", ns, name, obj)
			}
			return u, nil
		},
		competing: c.competingScalerOfScaledObject,
		create: func(ctx context.Context, so *unstructured.Unstructured) error {
			_, err := sos.Create(ctx, so, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		},
		delete: func(ctx context.Context, so *unstructured.Unstructured) error {
			uid := so.GetUID()
			return sos.Delete(ctx, so.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		},
		update: func(ctx context.Context, so *unstructured.Unstructured) error {
			_, err := sos.Update(ctx, so, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		inSync: ScaledObjectInSync, apply: ApplyScaledObject,
	}, desired, fmt.Sprintf("(min %d, max %d)", min, max), st)
}

// kedaHPAOfOurs: the HPA KEDA made for wva's ScaledObject of this VA.
func kedaHPAOfOurs(h *autoscalingv2.HorizontalPodAutoscaler, va *llmdv1alpha1.VariantAutoscaling) bool {
	for _, r := range h.OwnerReferences {
		if r.Kind == ScaledObjectGVK.Kind && r.APIVersion == ScaledObjectGVK.GroupVersion().String() && r.Name == va.Name {
			return true
		}
	}
	return false
}

// removeOwnHPA deletes the HPA wva made for the VA in HPA mode: after a
// switch to ScaledObjects it would fight KEDA's HPA.
func (c *Controller) removeOwnHPA(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling) error {
	h, err := c.HPAs.HorizontalPodAutoscalers(va.Namespace).Get(va.Name)
	if apierrors.IsNotFound(err) || (err == nil && !ownedBy(h, va.UID)) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.Kube.AutoscalingV2().HorizontalPodAutoscalers(va.Namespace).Delete(ctx, va.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &h.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete HPA %s/%s left from --output=hpa: %w", va.Namespace, va.Name, err)
	}
	c.Recorder.Eventf(va, corev1.EventTypeNormal, "HPADeleted", "deleted HPA %s: KEDA's HPA for ScaledObject %s replaces it", va.Name, va.Name)
	return nil
}
