package integration

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
	"github.com/wva-project/wva/pkg/scalefromzero"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// newWakeRig is the fast path's waker in process, on the real API server's
// scale subresource and VA annotations, with informer-backed state; scaler,
// when set, wraps the real scaler.
func newWakeRig(ctx context.Context, t *testing.T, cluster *harness.Cluster, wva versioned.Interface, ns string, scaler func(scalefromzero.Scaler) scalefromzero.Scaler) *scalefromzero.Waker {
	t.Helper()
	cs := cluster.Clientset()
	kubeInf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	wvaInf := wvainformers.NewSharedInformerFactoryWithOptions(wva, 0, wvainformers.WithNamespace(ns))
	state := &scalefromzero.State{
		VAs:          wvaInf.Llmd().V1alpha1().VariantAutoscalings().Lister(),
		Deployments:  kubeInf.Apps().V1().Deployments().Lister(),
		StatefulSets: kubeInf.Apps().V1().StatefulSets().Lister(),
	}
	synced := []cache.InformerSynced{wvaInf.Llmd().V1alpha1().VariantAutoscalings().Informer().HasSynced,
		kubeInf.Apps().V1().Deployments().Informer().HasSynced, kubeInf.Apps().V1().StatefulSets().Informer().HasSynced}
	kubeInf.Start(ctx.Done())
	wvaInf.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), synced...))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	scales, err := scale.NewForConfig(cluster.RESTConfig, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cs.Discovery()))
	require.NoError(t, err)
	var s scalefromzero.Scaler = scalefromzero.SubresourceScaler{Scales: scales, Mapper: mapper}
	if scaler != nil {
		s = scaler(s)
	}
	return &scalefromzero.Waker{State: state, Scaler: s, Marker: scalefromzero.AnnotationMarker{Client: wva},
		Recorder: record.NewFakeRecorder(1000), Metrics: scalefromzero.NewMetrics(nil), Clock: clock.RealClock{},
		WakeTimeout: time.Minute, RetryAfter: 10 * time.Millisecond}
}

// waitAtZero waits until the waker's informers show the group at zero and
// lets the waker forget its previous wake.
func waitAtZero(ctx context.Context, t *testing.T, w *scalefromzero.Waker, key scalefromzero.GroupKey) {
	t.Helper()
	testenv.Eventually(ctx, t, "the informers show the group at zero", func() (bool, string) {
		snap, err := w.State.Snapshot(false, nil)
		if err != nil {
			return false, err.Error()
		}
		zero := snap.ZeroGroups()
		w.Sync(zero)
		for _, g := range zero {
			if g.Key == key {
				return true, ""
			}
		}
		return false, "not at zero"
	})
}

// TestWakeMarkerBeforeScale: across wake-ups by the fast path, the VA as of
// the revision just before the target's scale from 0 (read exactly from
// etcd) already carries that wake's marker. A reader that sees the replica
// and then reads the VA (or writes it conditionally) cannot miss the wake.
func TestWakeMarkerBeforeScale(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, name, model, trials = "wake-order", "llama-l4", "meta/llama", 10
	cluster, cs, wva := startCluster(ctx, t, ns)
	sfzDeployment(ctx, t, cs, ns, name, 0, nil)
	_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, newVA(ns, name, model, "5", 0, 2), metav1.CreateOptions{})
	require.NoError(t, err)

	waker := newWakeRig(ctx, t, cluster, wva, ns, nil)
	key := scalefromzero.GroupKey{Namespace: ns, ModelID: model}
	for i := range trials {
		if i > 0 {
			_, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, name,
				&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		waitAtZero(ctx, t, waker, key)
		start := time.Now().Add(-time.Millisecond)
		o := waker.Wake(ctx, key, time.Now())
		require.Equal(t, scalefromzero.ResultScaled, o.Result, "trial %d: %s", i, o.Message)
		// Nothing else writes the Deployment here (no controller-manager):
		// its revision now is the scale's.
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(1), *d.Spec.Replicas)
		scaledAt, err := strconv.ParseUint(d.ResourceVersion, 10, 64)
		require.NoError(t, err)
		// The store as of the revision just before the scale, read
		// exactly from etcd (no watch that could lag).
		before := metav1.ListOptions{ResourceVersion: strconv.FormatUint(scaledAt-1, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}
		ds, err := cs.AppsV1().Deployments(ns).List(ctx, before)
		require.NoError(t, err)
		require.Len(t, ds.Items, 1)
		require.Zero(t, *ds.Items[0].Spec.Replicas, "trial %d: revision %d is the scale from 0", i, scaledAt)
		vs, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).List(ctx, before)
		require.NoError(t, err)
		require.Len(t, vs.Items, 1)
		marker := vs.Items[0].Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
		require.NotEmpty(t, marker, "trial %d: the target had a replica at revision %d before the VA had a wake marker", i, scaledAt)
		at, err := time.Parse(time.RFC3339Nano, marker)
		require.NoError(t, err)
		assert.False(t, at.Before(start), "trial %d: at the target's revision %d the VA carried only an older wake (%s)", i, scaledAt, marker)
	}
}

// failingScaler fails every scale call after the marker is written, as a
// forbidden or timed-out scale would.
type failingScaler struct{ err error }

func (f failingScaler) ScaleFromZero(context.Context, scalefromzero.Target) (bool, error) {
	return false, f.err
}

// TestWakeMarkerTakenBackOnFailedScale: a wake marker whose scale failed is
// taken back on the API server (the previous wake's marker restored), so it
// holds nothing up; the target stays at zero.
func TestWakeMarkerTakenBackOnFailedScale(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, model = "wake-failed", "meta/llama"
	cluster, cs, wva := startCluster(ctx, t, ns)
	const previous = "2026-01-01T00:00:00Z"
	for _, tc := range []struct{ name, before string }{{"fresh", ""}, {"woken-before", previous}} {
		sfzDeployment(ctx, t, cs, ns, tc.name, 0, nil)
		va := newVA(ns, tc.name, model+"-"+tc.name, "5", 0, 2)
		if tc.before != "" {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: tc.before}
		}
		_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waker := newWakeRig(ctx, t, cluster, wva, ns, func(scalefromzero.Scaler) scalefromzero.Scaler {
		return failingScaler{errors.New("scale refused")}
	})
	for _, tc := range []struct{ name, before string }{{"fresh", ""}, {"woken-before", previous}} {
		t.Run(tc.name, func(t *testing.T) {
			key := scalefromzero.GroupKey{Namespace: ns, ModelID: model + "-" + tc.name}
			waitAtZero(ctx, t, waker, key)
			o := waker.Wake(ctx, key, time.Now())
			require.Equal(t, scalefromzero.ResultError, o.Result)
			va, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, tc.name, metav1.GetOptions{})
			require.NoError(t, err)
			got, has := va.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
			assert.Equal(t, tc.before != "", has, "marker present: %q", got)
			assert.Equal(t, tc.before, got, "the previous wake's marker, or none")
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, tc.name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, int32(0), *d.Spec.Replicas)
		})
	}
}
