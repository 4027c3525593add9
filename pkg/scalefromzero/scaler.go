package scalefromzero

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/scale"
)

// Target is a variant's scale target.
type Target struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
	// ResourceVersion of the target as last seen by the informer; the
	// scale call is conditional on it, so a replica count someone else set
	// in the meantime is never overwritten.
	ResourceVersion string
}

func (t Target) String() string { return fmt.Sprintf("%s %s/%s", t.GVK.Kind, t.Namespace, t.Name) }

// Scaler brings a target from zero to one replica.
type Scaler interface {
	// ScaleFromZero sets spec.replicas to 1 if it is still 0. scaled is
	// false (and err nil) when the target already had replicas.
	ScaleFromZero(ctx context.Context, t Target) (scaled bool, err error)
}

// resettableMapper is a RESTMapper whose discovery cache can be dropped
// (restmapper.DeferredDiscoveryRESTMapper), for kinds installed after start.
type resettableMapper interface {
	meta.RESTMapper
	Reset()
}

// SubresourceScaler scales through the scale subresource, so Deployments,
// StatefulSets and LeaderWorkerSets (any kind with /scale) work alike.
type SubresourceScaler struct {
	Scales scale.ScalesGetter
	Mapper meta.RESTMapper
}

// ScaleFromZero implements Scaler with one conditional merge patch; on a
// conflict it reads the scale and updates only if replicas are still 0.
func (s SubresourceScaler) ScaleFromZero(ctx context.Context, t Target) (bool, error) {
	gvr, err := s.resource(t.GVK)
	if err != nil {
		return false, err
	}
	patch := `{"spec":{"replicas":1}}`
	if t.ResourceVersion != "" {
		patch = fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":1}}`, t.ResourceVersion)
	}
	scales := s.Scales.Scales(t.Namespace)
	_, err = scales.Patch(ctx, gvr, t.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsConflict(err) {
		return false, fmt.Errorf("scale %s to 1: %w", t, err)
	}
	// The informer's copy was stale: decide again on the live value.
	cur, err := scales.Get(ctx, gvr.GroupResource(), t.Name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get scale of %s: %w", t, err)
	}
	if cur.Spec.Replicas > 0 {
		return false, nil
	}
	cur.Spec.Replicas = 1
	if _, err := scales.Update(ctx, gvr.GroupResource(), cur, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("scale %s to 1: %w", t, err)
	}
	return true, nil
}

func (s SubresourceScaler) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	m, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		if r, ok := s.Mapper.(resettableMapper); ok {
			r.Reset() // the kind may have been installed after our discovery
			m, err = s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("resource for %s: %w", gvk, err)
	}
	return m.Resource, nil
}
