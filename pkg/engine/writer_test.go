package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned/fake"
)

func TestWriteStatusRetriesTransientErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "llmd.ai", Resource: "variantautoscalings"}
	tooMany := apierrors.NewTooManyRequests("slow down", 1)
	internal := apierrors.NewInternalError(errors.New("etcd hiccup"))
	serverTimeout := apierrors.NewServerTimeout(gr, "update", 1)
	timeout := apierrors.NewTimeoutError("request timed out", 1)
	conflict := apierrors.NewConflict(gr, "llama", errors.New("modified"))
	forbidden := apierrors.NewForbidden(gr, "llama", errors.New("no"))
	backoff := wait.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 2}
	cases := map[string]struct {
		err          error
		failures     int
		wantAttempts int
		wantErr      func(error) bool // nil: the write lands
	}{
		"429 twice, then lands":            {tooMany, 2, 3, nil},
		"500 four times, lands on the 5th": {internal, 4, 5, nil},
		"server timeout once":              {serverTimeout, 1, 2, nil},
		"504 timeout once":                 {timeout, 1, 2, nil},
		"conflict twice, re-read, lands":   {conflict, 2, 3, nil},
		"500 past the bound: gives up":     {internal, 10, 5, apierrors.IsInternalError},
		"429 past the bound: gives up":     {tooMany, 10, 5, apierrors.IsTooManyRequests},
		"forbidden is not retried":         {forbidden, 10, 1, apierrors.IsForbidden},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := va("prod", "llama", "m", "5", 1, 5)
			client := fake.NewSimpleClientset(v)
			attempts := 0
			client.PrependReactor("update", "variantautoscalings", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				attempts++
				if attempts <= tc.failures {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			status := llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: 4}}
			err := ClientStatusWriter{Client: client, Backoff: &backoff}.WriteStatus(context.Background(), v, status)
			assert.Equal(t, tc.wantAttempts, attempts)
			got, getErr := client.LlmdV1alpha1().VariantAutoscalings("prod").Get(context.Background(), "llama", metav1.GetOptions{})
			require.NoError(t, getErr)
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, int32(4), got.Status.DesiredOptimizedAlloc.NumReplicas)
				return
			}
			require.Error(t, err)
			assert.True(t, tc.wantErr(err), "%v", err)
			assert.Zero(t, got.Status.DesiredOptimizedAlloc.NumReplicas, "nothing written")
		})
	}
}

// A cancelled ctx (a deposed leader) ends the retries at once, not after
// the backoff.
func TestWriteStatusHonoursContext(t *testing.T) {
	v := va("prod", "llama", "m", "5", 1, 5)
	client := fake.NewSimpleClientset(v)
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	client.PrependReactor("update", "variantautoscalings", func(k8stesting.Action) (bool, runtime.Object, error) {
		attempts++
		cancel()
		return true, nil, apierrors.NewTooManyRequests("slow down", 1)
	})
	backoff := wait.Backoff{Steps: 5, Duration: time.Minute, Factor: 2}
	start := time.Now()
	err := ClientStatusWriter{Client: client, Backoff: &backoff}.WriteStatus(ctx, v, llmdv1alpha1.VariantAutoscalingStatus{})
	assert.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	assert.Equal(t, 1, attempts)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A decision made from a VA read before a wake is not written after it:
// the conflict the fast path's marker causes ends the write.
func TestWriteStatusAbandonsDecisionBeforeWake(t *testing.T) {
	gr := schema.GroupResource{Group: "llmd.ai", Resource: "variantautoscalings"}
	const old, woke = "2026-05-01T11:00:00Z", "2026-05-01T12:00:00.5Z"
	backoff := wait.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 2}
	for _, tc := range []struct {
		name          string
		basis, latest string // the marker the decision saw, and the one written meanwhile
		wantErr       error
	}{
		{name: "woken meanwhile", latest: woke, wantErr: ErrWokenMeanwhile},
		{name: "woken again meanwhile", basis: old, latest: woke, wantErr: ErrWokenMeanwhile},
		{name: "wake seen by the decision", basis: woke, latest: woke},
		{name: "mark taken back meanwhile", basis: woke},
		{name: "no wake", wantErr: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := va("prod", "llama", "m", "5", 1, 5)
			if tc.basis != "" {
				v.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: tc.basis}
			}
			client := fake.NewSimpleClientset(v)
			attempts := 0
			client.PrependReactor("update", "variantautoscalings", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				if attempts++; attempts > 1 {
					return false, nil, nil
				}
				// The fast path's marker lands between the cycle's read and its write.
				cur := v.DeepCopy()
				cur.Annotations = nil
				if tc.latest != "" {
					cur.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: tc.latest}
				}
				require.NoError(t, client.Tracker().Update(gr.WithVersion("v1alpha1"), cur, "prod"))
				return true, nil, apierrors.NewConflict(gr, "llama", errors.New("modified"))
			})
			status := llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, Reason: "idle"}}
			err := ClientStatusWriter{Client: client, Backoff: &backoff}.WriteStatus(context.Background(), v, status)
			got, getErr := client.LlmdV1alpha1().VariantAutoscalings("prod").Get(context.Background(), "llama", metav1.GetOptions{})
			require.NoError(t, getErr)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, 1, attempts, "not retried")
				assert.Empty(t, got.Status.DesiredOptimizedAlloc.Reason, "nothing written")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "idle", got.Status.DesiredOptimizedAlloc.Reason, "written on the fresh copy")
		})
	}
}

type failingWriter struct{ err error }

func (f failingWriter) WriteStatus(context.Context, *llmdv1alpha1.VariantAutoscaling, llmdv1alpha1.VariantAutoscalingStatus) error {
	return f.err
}

// When a status write finally fails, what is served stays the last decision
// written: the VA status is untouched, and wva_desired_replicas shows that
// decision too (or no series when there was none), not the unwritten one.
func TestFailedWriteServesLastGood(t *testing.T) {
	decided := va("prod", "l4", "llama", "5", 1, 5)
	decided.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 2, LastRunTime: metav1.NewTime(t0.Add(-time.Minute))}
	// Decided 0, then woken by the fast path: the provider serves 1.
	woken := va("prod", "l4", "llama", "5", 0, 5)
	woken.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, LastRunTime: metav1.NewTime(t0.Add(-time.Minute))}
	woken.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: t0.Add(-30 * time.Second).Format(time.RFC3339Nano)}
	cases := map[string]struct {
		va         *llmdv1alpha1.VariantAutoscaling
		wantSeries int
		wantGauge  float64
	}{
		"previously decided 2":           {decided, 1, 2},
		"never decided":                  {va("prod", "l4", "llama", "5", 1, 5), 0, 0},
		"decided 0 before the last wake": {woken, 1, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := &Engine{Views: &fakeViews{views: []decide.View{{VA: tc.va, Target: resolved(2, "p1", "p2")}}},
				// KV 0.78 on both pods decides 3 (TestRunOnce).
				Metrics: &fakeMetrics{res: collector.Result{Pods: pods("prod", 0.78, "p1", "p2")}},
				Status:  failingWriter{apierrors.NewInternalError(errors.New("etcd down"))}, Config: percentageStore(t, ""),
				Pipeline: decide.Default(), Observe: NewMetrics(prometheus.NewRegistry()), Clock: clocktesting.NewFakeClock(t0),
				Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}
			c, err := e.RunOnce(context.Background())
			require.Error(t, err)
			assert.Equal(t, 1, c.WriteFailures)
			assert.Equal(t, int32(3), c.Results[0].Targets[0].Replicas, "the new decision differs from the last good")
			require.Equal(t, tc.wantSeries, testutil.CollectAndCount(e.Observe.DesiredReplicas))
			if tc.wantSeries > 0 {
				assert.Equal(t, tc.wantGauge, testutil.ToFloat64(e.Observe.DesiredReplicas.WithLabelValues("l4", "prod", "llama", "")))
			}
		})
	}
}
