package daemon

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestLeaseFlagsAndValidate(t *testing.T) {
	l := DefaultLease("wva-x", "ns", true)
	require.NoError(t, l.Validate())
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.AddFlags(fs, "elect")
	require.NoError(t, fs.Parse([]string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=5s", "--leader-election-namespace=other", "--leader-election-identity=replica-a"}))
	assert.Equal(t, 4*time.Second, l.LeaseDuration)
	assert.Equal(t, "other", l.Namespace)
	assert.Equal(t, "replica-a", l.Identity)
	assert.ErrorContains(t, l.Validate(), "lease-duration (4s) > renew-deadline (5s)")
	l.Enabled = false
	assert.NoError(t, l.Validate(), "timings do not matter without election")
}

// TestRunLeaderElectedOneWorkAtATime: a replica whose Lease renewals fail
// loses leadership, and regains it as soon as the API server answers again
// (the Lease still names it). The work of the lost term is still ending
// (an engine cycle finishing its writes): the new term must not start a
// second work beside it, and leading must stay true for the new term.
func TestRunLeaderElectedOneWorkAtATime(t *testing.T) {
	kube := fake.NewSimpleClientset()
	var outage atomic.Bool
	var updates atomic.Int64 // successful Lease writes
	kube.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() != "update" && action.GetVerb() != "create" {
			return false, nil, nil
		}
		if outage.Load() {
			return true, nil, errors.New("API server unavailable")
		}
		updates.Add(1)
		return false, nil, nil
	})
	lease := Lease{Enabled: true, Namespace: "wva-system", Name: "wva-test", Identity: "replica-a",
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}

	var entries, active atomic.Int32
	var mu sync.Mutex
	var maxActive int32
	var calls []bool // leading's arguments, in order
	leading := func(b bool) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, b)
	}
	isLeading := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0 && calls[len(calls)-1]
	}
	lost, finishFirst := make(chan struct{}), make(chan struct{})
	work := func(ctx context.Context) {
		n := entries.Add(1)
		a := active.Add(1)
		defer active.Add(-1)
		mu.Lock()
		maxActive = max(maxActive, a)
		mu.Unlock()
		<-ctx.Done()
		if n == 1 {
			close(lost)
			<-finishFirst // the lost term's last cycle is still writing
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		assert.NoError(t, RunLeaderElected(ctx, kube, lease, nil, leading, work))
	}()
	defer func() {
		cancel()
		<-returned
	}()

	require.Eventually(t, func() bool { return entries.Load() == 1 && isLeading() }, 10*time.Second, 10*time.Millisecond, "first term")
	outage.Store(true)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the Lease was not lost during the outage")
	}
	outage.Store(false)
	// Regained: the new term acquired the Lease and renewed it twice,
	// retry periods after its OnStartedLeading began.
	base := updates.Load()
	require.Eventually(t, func() bool { return updates.Load() >= base+3 }, 10*time.Second, 10*time.Millisecond, "Lease regained")
	assert.Equal(t, int32(1), entries.Load(), "a second work started while the lost term's work was still running")

	close(finishFirst)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return entries.Load() == 2 && len(calls) >= 3
	}, 10*time.Second, 10*time.Millisecond, "the new term starts its work")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, int32(1), maxActive, "works ran concurrently")
	assert.Equal(t, []bool{true, false, true}, calls, "the lost term's end must not clear leading for the new term")
}
