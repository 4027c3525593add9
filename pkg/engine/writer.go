package engine

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
)

// ErrWokenMeanwhile: the fast path woke the variant after the cycle read its
// VA, so the decision was made without the wake and is not written (the
// status write is conditional on the VA's resourceVersion, and the fast
// path writes its marker before it scales). The decision of record then
// predates the wake, which readers hold at >= 1; the next cycle sees it.
var ErrWokenMeanwhile = errors.New("the scale-from-zero fast path woke the variant after this cycle read it")

// StatusWriteBackoff bounds WriteStatus's retries: 5 attempts over about
// 1.5 s (100, 200, 400, 800 ms, jittered), well inside a cycle, so an API
// server shedding load (429) or failing briefly (500, timeouts) is not
// hammered and the cycle still ends.
var StatusWriteBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1}

// ClientStatusWriter writes VA status through the API server.
type ClientStatusWriter struct {
	Client versioned.Interface
	// Backoff overrides StatusWriteBackoff (tests).
	Backoff *wait.Backoff
}

// retriable: conflicts (re-read and re-apply) and transient server-side
// failures (throttling, internal errors, timeouts).
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// WriteStatus updates the engine-owned status fields. On a conflict it
// re-reads the VA and applies the same fields to the fresh copy, so writes by
// other owners (the controller's actuation) are never lost and neither is
// the decision. Transient failures are retried with backoff; after the
// bound, or when ctx ends, the last error is returned.
func (w ClientStatusWriter) WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) error {
	vas := w.Client.LlmdV1alpha1().VariantAutoscalings(va.Namespace)
	current := va.DeepCopy()
	backoff := StatusWriteBackoff
	if w.Backoff != nil {
		backoff = *w.Backoff
	}
	// wait.ExponentialBackoffWithContext rather than retry.OnError: the
	// latter sleeps through a cancelled ctx (a deposed leader).
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		next := current.DeepCopy()
		MergeEngineStatus(&next.Status, status)
		_, err := vas.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: "wva-adapter"})
		switch {
		case err == nil:
			return true, nil
		case !retriable(err):
			return false, err
		case apierrors.IsConflict(err):
			latest, getErr := vas.Get(ctx, va.Name, metav1.GetOptions{})
			if getErr == nil {
				if wokenSince(va, latest) {
					return false, ErrWokenMeanwhile
				}
				current = latest
			}
		}
		lastErr = err
		return false, nil
	})
	if wait.Interrupted(err) && lastErr != nil {
		return lastErr // the bound was reached (or ctx ended) on a transient error
	}
	return err
}

// wokenSince: latest carries a wake marker that basis, the VA the decision
// was made from, did not.
func wokenSince(basis, latest *llmdv1alpha1.VariantAutoscaling) bool {
	b, l := basis.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt], latest.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
	return l != "" && l != b
}

// MergeEngineStatus copies the engine-owned fields of from into into
// (llmdv1alpha1.MergeEngineStatus).
func MergeEngineStatus(into *llmdv1alpha1.VariantAutoscalingStatus, from llmdv1alpha1.VariantAutoscalingStatus) {
	llmdv1alpha1.MergeEngineStatus(into, from)
}
