package scalefromzero

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
)

type fakeScaler struct {
	mu      sync.Mutex
	calls   []Target
	err     error
	already bool
	onCall  func(Target)
}

func (f *fakeScaler) ScaleFromZero(_ context.Context, t Target) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, t)
	if f.onCall != nil {
		f.onCall(t)
	}
	return !f.already && f.err == nil, f.err
}

func (f *fakeScaler) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Name)
	}
	return out
}

// fakeMarker records marks and take-backs; log, when set, is shared with
// the scaler to check the order of calls.
type fakeMarker struct {
	mu       sync.Mutex
	names    []string
	unmarked []string
	err      error
	log      *[]string
}

func (f *fakeMarker) Mark(_ context.Context, va *llmdv1alpha1.VariantAutoscaling, at time.Time) (Mark, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		*f.log = append(*f.log, "mark")
	}
	if f.err != nil {
		return Mark{}, f.err
	}
	f.names = append(f.names, va.Namespace+"/"+va.Name)
	return newMark(va, at), nil
}

func (f *fakeMarker) Unmark(_ context.Context, m Mark) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		*f.log = append(*f.log, "unmark")
	}
	f.unmarked = append(f.unmarked, m.Namespace+"/"+m.Name)
	return nil
}

type wakerFixture struct {
	*cluster
	waker    *Waker
	scaler   *fakeScaler
	marker   *fakeMarker
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
}

func newWakerFixture(c *cluster, budgeted bool) *wakerFixture {
	s := c.state()
	if budgeted {
		c.withNodeBudget(s)
	}
	f := &wakerFixture{cluster: c, scaler: &fakeScaler{}, marker: &fakeMarker{}, recorder: record.NewFakeRecorder(100),
		clock: clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))}
	f.waker = &Waker{State: s, Scaler: f.scaler, Marker: f.marker, Recorder: f.recorder, Metrics: NewMetrics(nil),
		Clock: f.clock, Budgeted: budgeted, WakeTimeout: time.Minute, RetryAfter: time.Second}
	return f
}

func (f *wakerFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *wakerFixture) sync() {
	snap, _ := f.waker.State.Snapshot(false, nil)
	f.waker.Sync(snap.ZeroGroups())
}

// TestWakeQuota: the namespace's GPU quota refuses a wake its pool allows;
// the refusal names the quota, and a variant of another namespace wakes.
// With --unbudgeted-variants=refuse a variant in no pool is refused too.
func TestWakeQuota(t *testing.T) {
	c := budgetCluster() // pool gpu-a: 2 of 8 GPUs left
	c.variant("team-a", "two", "m-two", "1", 0, "gpu-a", 2)
	c.variant("team-a", "loose", "m-loose", "1", 0, "", 1)
	c.quota("prod", "gpus", 7, 6) // prod/big's 6 GPUs: 1 left
	f := newWakerFixture(c, true)
	ctx := context.Background()

	o := f.waker.Wake(ctx, GroupKey{"prod", "m-two"}, f.clock.Now())
	assert.Equal(t, ResultBlocked, o.Result)
	assert.Contains(t, o.Message, "GPU quota: prod/two +1 (2 GPUs each) cut to +0: ResourceQuota prod/gpus (hard 7 GPUs, used 6) has 1 GPUs left")
	assert.Equal(t, []budget.Quota{{Namespace: "prod", Name: "gpus", Hard: 7, Used: 6}}, o.Quotas)
	assert.Empty(t, f.scaler.calls)
	ev := f.events()
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "Warning ScaleFromZeroBlocked GPU budget forbids waking model m-two: GPU quota: prod/two")

	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, GroupKey{"team-a", "m-two"}, f.clock.Now()).Result, "team-a has no quota; the pool has room")
	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, GroupKey{"team-a", "m-loose"}, f.clock.Now()).Result, "in no pool: unlimited by default")

	c.variant("team-a", "loose-b", "m-loose-b", "1", 0, "", 1)
	f.waker.Unbudgeted = budget.UnbudgetedRefuse
	o = f.waker.Wake(ctx, GroupKey{"team-a", "m-loose-b"}, f.clock.Now())
	assert.Equal(t, ResultBlocked, o.Result)
	assert.Contains(t, o.Message, "team-a/loose-b +1 refused (--unbudgeted-variants=refuse)")
}

func TestWakeOncePerGroup(t *testing.T) {
	c := newCluster()
	c.variant("prod", "h100", "llama", "15", 0, "", 1)
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	key := GroupKey{"prod", "llama"}
	ctx := context.Background()

	seen := f.clock.Now()
	f.clock.Step(3 * time.Millisecond)
	o := f.waker.Wake(ctx, key, seen)
	assert.Equal(t, ResultScaled, o.Result)
	assert.Equal(t, "l4", o.Variant, "the cheapest variant")
	assert.Equal(t, []string{"l4"}, f.scaler.names())
	assert.Equal(t, "1", f.scaler.calls[0].ResourceVersion, "the scale call is conditional on the cached version")
	assert.Equal(t, []string{"prod/l4"}, f.marker.names)
	ev := f.events()
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "Normal ScaledFromZero Requests are queued for model llama: scaled Deployment prod/l4 from 0 to 1")
	assert.Equal(t, uint64(1), histCount(t, f.waker.Metrics.Latency))
	assert.Equal(t, 1.0, testutil.ToFloat64(f.waker.Metrics.Decisions.WithLabelValues("scaled")))

	// More samples while the informer still says 0: no second call.
	f.sync()
	for range 5 {
		o = f.waker.Wake(ctx, key, f.clock.Now())
		assert.True(t, o.Repeated)
	}
	assert.Len(t, f.scaler.calls, 1)

	// The replica shows up: forgotten. Back at zero later: woken again.
	c.setReplicas("prod", "l4", 1)
	f.sync()
	assert.True(t, f.waker.Wake(ctx, key, f.clock.Now()).Active)
	c.setReplicas("prod", "l4", 0)
	f.sync()
	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, key, f.clock.Now()).Result)
	assert.Len(t, f.scaler.calls, 2)

	// Scaled up and down again between two ticks: no tick saw the replica,
	// but the target's version moved past the one the call was made on.
	c.setReplicas("prod", "l4", 1)
	c.setReplicas("prod", "l4", 0)
	bumpVersion(c, "prod", "l4", "9")
	f.sync()
	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, key, f.clock.Now()).Result)
	assert.Len(t, f.scaler.calls, 3)
}

func bumpVersion(c *cluster, ns, name, rv string) {
	obj, _, _ := c.deploys.GetByKey(ns + "/" + name)
	d := obj.(*appsv1.Deployment).DeepCopy()
	d.ResourceVersion = rv
	_ = c.deploys.Update(d)
}

func TestWakeTimeoutAllowsAnotherWake(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	key := GroupKey{"prod", "llama"}
	f.waker.Wake(context.Background(), key, f.clock.Now())
	f.clock.Step(59 * time.Second)
	f.sync()
	assert.True(t, f.waker.Wake(context.Background(), key, f.clock.Now()).Repeated)
	f.clock.Step(2 * time.Second)
	f.sync()
	assert.Equal(t, ResultScaled, f.waker.Wake(context.Background(), key, f.clock.Now()).Result)
	assert.Len(t, f.scaler.calls, 2, "the target never showed a replica: woken again after --wake-timeout")
}

func TestWakeErrorRetries(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	f.scaler.err = errors.New("forbidden")
	key := GroupKey{"prod", "llama"}
	o := f.waker.Wake(context.Background(), key, f.clock.Now())
	assert.Equal(t, ResultError, o.Result)
	assert.True(t, f.waker.Wake(context.Background(), key, f.clock.Now()).Repeated, "no hammering within --retry-after")
	f.clock.Step(time.Second)
	f.scaler.err = nil
	assert.Equal(t, ResultScaled, f.waker.Wake(context.Background(), key, f.clock.Now()).Result)
	ev := f.events()
	require.Len(t, ev, 2)
	assert.Contains(t, ev[0], "Warning ScaleFromZeroFailed")
	assert.Equal(t, 1.0, testutil.ToFloat64(f.waker.Metrics.Decisions.WithLabelValues("error")))
}

func TestWakeAlreadyScaled(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	f.scaler.already = true
	o := f.waker.Wake(context.Background(), GroupKey{"prod", "llama"}, f.clock.Now())
	assert.Equal(t, ResultAlreadyScaled, o.Result)
	assert.Equal(t, f.marker.names, f.marker.unmarked, "someone else scaled it: the mark is taken back")
	assert.Equal(t, uint64(0), histCount(t, f.waker.Metrics.Latency))
}

func TestWakeBudget(t *testing.T) {
	f := newWakerFixture(budgetCluster(), true)
	ctx := context.Background()
	four, two := GroupKey{"prod", "m-four"}, GroupKey{"prod", "m-two"}

	o := f.waker.Wake(ctx, four, f.clock.Now())
	assert.Equal(t, ResultBlocked, o.Result)
	assert.Contains(t, o.Message, "prod/four +1 (4 GPUs each) cut to +0: pool gpu-a has 2 GPUs")
	assert.Contains(t, o.Message, "held by prod/big (model m-big, 6 GPUs)")
	assert.Empty(t, f.scaler.calls)
	assert.Equal(t, 6.0, testutil.ToFloat64(f.waker.Metrics.BudgetBlocked.WithLabelValues("prod", "m-four", "prod/big")))
	ev := f.events()
	require.Len(t, ev, 1)
	assert.True(t, strings.HasPrefix(ev[0], "Warning ScaleFromZeroBlocked GPU budget forbids waking model m-four"), ev[0])

	// Retried after --retry-after; the same picture is not re-announced.
	f.clock.Step(time.Second)
	f.sync()
	assert.Equal(t, ResultBlocked, f.waker.Wake(ctx, four, f.clock.Now()).Result)
	assert.Empty(t, f.events())
	assert.Equal(t, 2.0, testutil.ToFloat64(f.waker.Metrics.Decisions.WithLabelValues("budget_blocked")))

	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, two, f.clock.Now()).Result)
	assert.Equal(t, []string{"two"}, f.scaler.names())

	// "two" is reserved although the informer still says 0: a second
	// 2-GPU group does not fit.
	f.variant("prod", "two-b", "m-two-b", "1", 0, "gpu-a", 2)
	o = f.waker.Wake(ctx, GroupKey{"prod", "m-two-b"}, f.clock.Now())
	assert.Equal(t, ResultBlocked, o.Result)
	assert.Contains(t, HolderNames(o.Blockers), "prod/two (2 GPUs)")

	// The big variant goes away: the blocked group leaves its gauge once woken.
	f.setReplicas("prod", "big", 0)
	_ = f.pods.Delete(mustGet(f.pods, "prod/big-0"))
	f.clock.Step(time.Second)
	f.sync()
	assert.Equal(t, ResultScaled, f.waker.Wake(ctx, four, f.clock.Now()).Result)
	assert.Equal(t, 2, testutil.CollectAndCount(f.waker.Metrics.BudgetBlocked), "m-four's series are gone; m-two-b's two holders stay until it is retried")
}

// histCount is a histogram's sample count.
func histCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(h))
	fams, err := reg.Gather()
	require.NoError(t, err)
	return fams[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

func mustGet(idx interface {
	GetByKey(string) (any, bool, error)
}, key string) any {
	obj, _, _ := idx.GetByKey(key)
	return obj
}

func TestWakeModel(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	c.variant("dev", "l4", "llama", "5", 1, "", 1)
	c.variant("prod", "mistral", "mistral", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	out := f.waker.WakeModel(context.Background(), "llama", f.clock.Now())
	require.Len(t, out, 1, "only groups at zero")
	assert.Equal(t, ResultScaled, out[0].Result)
	assert.Equal(t, []string{"l4"}, f.scaler.names())
	assert.Empty(t, f.waker.WakeModel(context.Background(), "unknown", f.clock.Now()))
}

// TestWakeMarksFirst: the marker is written before the scale call, a failed
// mark sends no scale, and a mark without a wake is taken back.
func TestWakeMarksFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		markErr    error
		scaleErr   error
		already    bool
		wantCalls  []string
		wantResult Result
	}{
		{name: "woken", wantCalls: []string{"mark", "scale"}, wantResult: ResultScaled},
		{name: "scale fails", scaleErr: errors.New("boom"), wantCalls: []string{"mark", "scale", "unmark"}, wantResult: ResultError},
		{name: "already scaled", already: true, wantCalls: []string{"mark", "scale", "unmark"}, wantResult: ResultAlreadyScaled},
		{name: "mark fails", markErr: errors.New("forbidden"), wantCalls: []string{"mark"}, wantResult: ResultError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster()
			c.variant("prod", "l4", "llama", "5", 0, "", 1)
			f := newWakerFixture(c, false)
			var calls []string
			f.marker.log, f.marker.err = &calls, tc.markErr
			f.scaler.err, f.scaler.already = tc.scaleErr, tc.already
			f.scaler.onCall = func(Target) { calls = append(calls, "scale") }
			o := f.waker.Wake(context.Background(), GroupKey{"prod", "llama"}, f.clock.Now())
			assert.Equal(t, tc.wantResult, o.Result)
			assert.Equal(t, tc.wantCalls, calls)
		})
	}
}

// TestNewMarkNotBeforeDecision: a mark is never older than the decision of
// record, so that decision counts as made before the wake.
func TestNewMarkNotBeforeDecision(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 500e6, time.UTC)
	for _, tc := range []struct {
		name    string
		lastRun time.Time
		prev    string
		want    time.Time
	}{
		{name: "never decided", want: now},
		{name: "decided earlier", lastRun: now.Add(-30 * time.Second), want: now},
		{name: "decision stamped later (skew)", lastRun: now.Add(2 * time.Second), want: now.Add(2 * time.Second)},
		{name: "previous wake kept for take-back", prev: "2026-05-01T11:00:00Z", want: now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			va := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "l4"}}
			va.Status.DesiredOptimizedAlloc.LastRunTime = metav1.NewTime(tc.lastRun)
			if tc.prev != "" {
				va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: tc.prev}
			}
			m := newMark(va, now)
			assert.True(t, tc.want.Equal(m.At), "at %v", m.At)
			assert.Equal(t, tc.want.UTC().Format(time.RFC3339Nano), m.Value)
			assert.Equal(t, tc.prev, m.Previous)
			assert.Equal(t, tc.prev != "", m.HadPrevious)
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: m.Value}
			assert.True(t, va.DecidedBeforeWake(), "the decision of record predates the mark")
		})
	}
}
