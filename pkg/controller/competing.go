package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// competitor is another object already scaling the VA's target. Two
// scalers on one target fight: the HPA controller stops both
// (AmbiguousSelector), KEDA's webhook refuses a second ScaledObject.
type competitor struct {
	what    string // "HPA x", "ScaledObject y"
	name    string
	created metav1.Time
}

// olderThan says whether the competitor was made before obj; equal
// timestamps (one-second resolution) are ordered by name so that two VAs
// on one target agree on which of them came first.
func (o *competitor) olderThan(obj metav1.Object) bool {
	ts := obj.GetCreationTimestamp()
	if !o.created.Equal(&ts) {
		return o.created.Before(&ts)
	}
	return o.name < obj.GetName()
}

// competingHPA returns the first HPA of hpas (not wva's for this VA) that
// targets the VA's scale target. In ScaledObject mode KEDA's own HPA for
// wva's ScaledObject does not count.
func competingHPA(va *llmdv1alpha1.VariantAutoscaling, hpas []*autoscalingv2.HorizontalPodAutoscaler) *competitor {
	for _, h := range hpas {
		ref := h.Spec.ScaleTargetRef
		if h.Name != va.Name && ref.Kind == va.Spec.ScaleTargetRef.Kind && ref.Name == va.Spec.ScaleTargetRef.Name &&
			!ownedBy(h, va.UID) && !kedaHPAOfOurs(h, va) {
			return &competitor{what: "HPA " + h.Name, name: h.Name, created: h.CreationTimestamp}
		}
	}
	return nil
}

// competingScaledObject returns the first ScaledObject of sos, other than
// wva's for this VA, that targets the VA's scale target.
func competingScaledObject(va *llmdv1alpha1.VariantAutoscaling, sos []*unstructured.Unstructured) *competitor {
	for _, so := range sos {
		if so.GetName() == va.Name {
			continue
		}
		if kind, name, ok := scaleTargetOf(so); ok && kind == va.Spec.ScaleTargetRef.Kind && name == va.Spec.ScaleTargetRef.Name {
			return &competitor{what: "ScaledObject " + so.GetName(), name: so.GetName(), created: so.GetCreationTimestamp()}
		}
	}
	return nil
}

// scaleTargetOf reads the scale target of an HPA or a ScaledObject.
func scaleTargetOf(obj any) (kind, name string, ok bool) {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		return o.Spec.ScaleTargetRef.Kind, o.Spec.ScaleTargetRef.Name, true
	case *unstructured.Unstructured:
		kind, _, _ = unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "kind")
		name, _, _ = unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
		if kind == "" {
			kind = "Deployment" // KEDA's default
		}
		return kind, name, name != ""
	}
	return "", "", false
}

// hpasOf lists the HPAs of a namespace from the cache, or from the API
// where the cache may not yet hold an HPA made a moment ago.
func (c *Controller) hpasOf(ctx context.Context, namespace string, fromAPI bool) ([]*autoscalingv2.HorizontalPodAutoscaler, error) {
	if !fromAPI {
		return c.HPAs.HorizontalPodAutoscalers(namespace).List(labels.Everything())
	}
	list, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list HPAs in %s: %w", namespace, err)
	}
	out := make([]*autoscalingv2.HorizontalPodAutoscaler, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// scaledObjectsOf is hpasOf for KEDA's ScaledObjects.
func (c *Controller) scaledObjectsOf(ctx context.Context, namespace string, fromAPI bool) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	if fromAPI {
		list, err := c.Dynamic.Resource(ScaledObjectGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list ScaledObjects in %s: %w", namespace, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out, nil
	}
	all, err := c.ScaledObjects.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, obj := range all {
		if so, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, so)
		}
	}
	return out, nil
}

// competingScalerOfHPA finds an HPA competing with the VA's.
func (c *Controller) competingScalerOfHPA(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, fromAPI bool) (*competitor, error) {
	hpas, err := c.hpasOf(ctx, va.Namespace, fromAPI)
	if err != nil {
		return nil, err
	}
	return competingHPA(va, hpas), nil
}

// competingScalerOfScaledObject finds an HPA that is not KEDA's for this
// VA, or another ScaledObject, on the VA's target: KEDA refuses to add a
// second scaler, and wva must not make it try.
func (c *Controller) competingScalerOfScaledObject(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, fromAPI bool) (*competitor, error) {
	if other, err := c.competingScalerOfHPA(ctx, va, fromAPI); other != nil || err != nil {
		return other, err
	}
	sos, err := c.scaledObjectsOf(ctx, va.Namespace, fromAPI)
	if err != nil {
		return nil, err
	}
	return competingScaledObject(va, sos), nil
}
