package scalefromzero

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
)

// Marker writes the wake marker ([llmdv1alpha1.AnnotationScaledFromZeroAt])
// on the VA before the scale call: the marker and the replica live on
// different objects, so no single write can carry both, but a marker
// committed before the scale is sent means every version of the target
// with the woken replica is newer than a VA version carrying the marker.
// A reader that observed the replica and then reads the VA from the API
// server (the controller before scaling to 0), or a status write made on a
// VA version without the marker (the engine's, which is conditional on its
// resourceVersion), cannot miss it.
type Marker interface {
	// Mark sets the marker on va to at, or to the decision of record's
	// lastRunTime if that is later, and returns what it wrote.
	Mark(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, at time.Time) (Mark, error)
	// Unmark takes back a mark whose scale did not happen, if the VA still
	// carries it, restoring the previous wake's marker.
	Unmark(ctx context.Context, m Mark) error
}

// Mark is a wake marker as written.
type Mark struct {
	Namespace, Name string
	At              time.Time
	// Value is the annotation as written; Previous the one it replaced.
	Value, Previous string
	HadPrevious     bool
}

// markAttempts bounds the conflict retries of Mark (each after a fresh GET).
const markAttempts = 3

// newMark is the mark to write on va. It is never older than the decision
// of record: DecidedBeforeWake must hold for every decision that could not
// have seen the wake.
func newMark(va *llmdv1alpha1.VariantAutoscaling, at time.Time) Mark {
	if last := va.Status.DesiredOptimizedAlloc.LastRunTime.Time; last.After(at) {
		at = last
	}
	prev, had := va.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
	return Mark{Namespace: va.Namespace, Name: va.Name, At: at, Value: at.UTC().Format(time.RFC3339Nano), Previous: prev, HadPrevious: had}
}

// AnnotationMarker is the Marker on the API server.
type AnnotationMarker struct {
	Client versioned.Interface
}

// Mark implements Marker with a merge patch conditional on the VA's
// resourceVersion, so the mark is compared with the decision of record it
// lands next to; on a conflict it reads the VA again.
func (m AnnotationMarker) Mark(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, at time.Time) (Mark, error) {
	vas := m.Client.LlmdV1alpha1().VariantAutoscalings(va.Namespace)
	cur := va
	for attempt := 1; ; attempt++ {
		mk := newMark(cur, at)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cur.ResourceVersion,
			"annotations": map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: mk.Value}}})
		if err != nil {
			return Mark{}, err
		}
		_, err = vas.Patch(ctx, va.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return mk, nil
		}
		if !apierrors.IsConflict(err) || attempt == markAttempts {
			return Mark{}, fmt.Errorf("set %s on VariantAutoscaling %s/%s: %w", llmdv1alpha1.AnnotationScaledFromZeroAt, va.Namespace, va.Name, err)
		}
		if cur, err = vas.Get(ctx, va.Name, metav1.GetOptions{}); err != nil {
			return Mark{}, fmt.Errorf("get VariantAutoscaling %s/%s: %w", va.Namespace, va.Name, err)
		}
	}
}

// Unmark implements Marker with a JSON patch whose test op makes it a no-op
// (a rejected patch) when the marker changed since.
func (m AnnotationMarker) Unmark(ctx context.Context, mk Mark) error {
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(llmdv1alpha1.AnnotationScaledFromZeroAt, "~", "~0"), "/", "~1")
	ops := []map[string]any{{"op": "test", "path": path, "value": mk.Value}, {"op": "remove", "path": path}}
	if mk.HadPrevious {
		ops[1] = map[string]any{"op": "replace", "path": path, "value": mk.Previous}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = m.Client.LlmdV1alpha1().VariantAutoscalings(mk.Namespace).Patch(ctx, mk.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	return err
}
