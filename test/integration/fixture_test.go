package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// adapterServingCert is the adapter Service's serving certificate, also
// valid for 127.0.0.1 where the test processes listen.
func adapterServingCert(t *testing.T, c *harness.Cluster) (cert, key []byte) {
	t.Helper()
	cert, key, err := c.IssueServingCert([]string{"wva-adapter.wva-system.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	require.NoError(t, err)
	return cert, key
}

// startController runs `wva controller` on the cluster without leader
// election, with the test's flags.
func startController(ctx context.Context, t *testing.T, c *harness.Cluster, flags ...string) *adapterProcess {
	t.Helper()
	return startWVAProcess(ctx, t, "controller", append([]string{"controller", "--kubeconfig=" + c.KubeconfigPath, "--leader-elect=false"}, flags...))
}

// adapterPair is two adapter replicas sharing the wva-adapter Lease, with
// lease timings short enough for a takeover within seconds.
type adapterPair struct {
	Leader, Follower *adapterProcess
	// FirstHolder is the Lease's holder identity when both had started.
	FirstHolder string
	kube        kubernetes.Interface
}

// startAdapterPair starts the two replicas and returns once one holds the
// Lease, telling which is which.
func startAdapterPair(ctx context.Context, t *testing.T, c *harness.Cluster, promURL string) *adapterPair {
	t.Helper()
	cert, key := adapterServingCert(t, c)
	flags := []string{"--leader-elect=true", "--leader-election-namespace=wva-system", "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s", "--status-heartbeat=1s"}
	a := startAdapter(ctx, t, c, promURL, cert, key, flags...)
	b := startAdapter(ctx, t, c, promURL, cert, key, flags...)
	p := &adapterPair{Leader: a, Follower: b, kube: c.Clientset()}
	testenv.Eventually(ctx, t, "a leader holds the Lease", func() (bool, string) { return p.Holder(ctx) != "", "no holder" })
	p.FirstHolder = p.Holder(ctx)
	// Each replica logs its own identity when it joins the election.
	own := `"leader election" identity="` + p.FirstHolder + `"`
	if strings.Contains(b.Log(), own) {
		p.Leader, p.Follower = b, a
	}
	require.Contains(t, p.Leader.Log(), own, "the Lease holder is one of the two replicas")
	return p
}

// Holder is the Lease's holder identity ("" when none).
func (p *adapterPair) Holder(ctx context.Context) string {
	l, err := p.kube.CoordinationV1().Leases("wva-system").Get(ctx, "wva-adapter", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// StopLeader stops the leader and waits until the follower holds the
// Lease; it returns when the leader was stopped.
func (p *adapterPair) StopLeader(ctx context.Context, t *testing.T) (stopped time.Time) {
	t.Helper()
	p.Leader.Stop()
	stopped = time.Now()
	testenv.Eventually(ctx, t, "the follower takes the Lease", func() (bool, string) {
		h := p.Holder(ctx)
		return h != "" && h != p.FirstHolder, h
	})
	return stopped
}

// directMetric is the one wva_desired_replicas value one adapter replica
// serves, bypassing the aggregator (with the admin client certificate the
// delegated authentication accepts).
func directMetric(ctx context.Context, c *harness.Cluster, port int, ns, variant string) (*v1beta1.ExternalMetricValue, error) {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := getRaw(ctx, cs, ns, variant)
	if err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("want 1 item, got %d", len(list.Items))
	}
	return &list.Items[0], nil
}
