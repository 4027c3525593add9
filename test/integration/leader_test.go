package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestLeaderElection: two adapter replicas, one Lease. Both serve the
// decision of record; only the leader decides; when the leader stops, the
// other takes over and decisions keep being confirmed.
func TestLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	var err error
	servingVariant(ctx, t, cs, "prod", "llama-l4", 2, nil)
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama", "5", 1, 4), metav1.CreateOptions{})
	require.NoError(t, err)

	// Prometheus is absent on purpose: decisions are held (first run: keep
	// current 2), which is enough to see who is deciding.
	cert, key, err := cluster.IssueServingCert([]string{"wva-adapter.wva-system.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	require.NoError(t, err)
	flags := []string{"--leader-elect=true", "--leader-election-namespace=wva-system", "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s", "--status-heartbeat=1s"}
	deadProm := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	a := startAdapter(ctx, t, cluster, deadProm, cert, key, flags...)
	b := startAdapter(ctx, t, cluster, deadProm, cert, key, flags...)

	holder := func() string {
		l, err := cs.CoordinationV1().Leases("wva-system").Get(ctx, "wva-adapter", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	testenv.Eventually(ctx, t, "a leader holds the Lease", func() (bool, string) { return holder() != "", "no holder" })
	first := holder()

	lastRun := func() time.Time {
		va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
		if err != nil {
			return time.Time{}
		}
		return va.Status.DesiredOptimizedAlloc.LastRunTime.Time
	}
	testenv.Eventually(ctx, t, "the leader decides", func() (bool, string) { return !lastRun().IsZero(), "no decision" })

	// Both replicas serve, leader or not (called directly, with the admin
	// client certificate the delegated authentication accepts).
	for _, p := range []*adapterProcess{a, b} {
		testenv.Eventually(ctx, t, "direct read from each replica", func() (bool, string) {
			v, err := directRead(ctx, cluster, p.Port, "prod", "llama-l4")
			return err == nil && v == 2, fmt_(v, err)
		})
	}

	leader, follower := a, b
	own := `"leader election" identity="` + first + `"`
	if strings.Contains(b.Log(), own) {
		leader, follower = b, a
	}
	require.Contains(t, leader.Log(), own, "the Lease holder is one of the two replicas")
	leader.Stop()
	testenv.Eventually(ctx, t, "the follower takes the Lease", func() (bool, string) {
		h := holder()
		return h != "" && h != first, h
	})
	before := lastRun()
	testenv.Eventually(ctx, t, "the new leader keeps confirming decisions", func() (bool, string) {
		return lastRun().After(before), lastRun().String()
	})
	v, err := directRead(ctx, cluster, follower.Port, "prod", "llama-l4")
	require.NoError(t, err)
	assert.Equal(t, int64(2), v)
}

// directRead asks one adapter replica for the metric, bypassing the
// aggregator.
func directRead(ctx context.Context, c *harness.Cluster, port int, ns, variant string) (int64, error) {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	list, err := getRaw(ctx, cs, ns, variant)
	if err != nil {
		return 0, err
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("want 1 item, got %d", len(list.Items))
	}
	return list.Items[0].Value.Value(), nil
}
