package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestLeaderElection: two adapter replicas, one Lease. Both serve the
// decision of record; only the leader decides; when the leader stops, the
// other takes over and decisions keep being confirmed.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	var err error
	servingVariant(ctx, t, cs, "prod", "llama-l4", 2, nil)
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama", "5", 1, 4), metav1.CreateOptions{})
	require.NoError(t, err)

	// Prometheus is absent on purpose: decisions are held (first run: keep
	// current 2), which is enough to see who is deciding.
	pair := startAdapterPair(ctx, t, cluster, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))

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
	for _, p := range []*adapterProcess{pair.Leader, pair.Follower} {
		testenv.Eventually(ctx, t, "direct read from each replica", func() (bool, string) {
			v, err := directRead(ctx, cluster, p.Port, "prod", "llama-l4")
			return err == nil && v == 2, fmt_(v, err)
		})
	}

	pair.StopLeader(ctx, t)
	before := lastRun()
	testenv.Eventually(ctx, t, "the new leader keeps confirming decisions", func() (bool, string) {
		return lastRun().After(before), lastRun().String()
	})
	v, err := directRead(ctx, cluster, pair.Follower.Port, "prod", "llama-l4")
	require.NoError(t, err)
	assert.Equal(t, int64(2), v)
}

// directRead is the value one adapter replica serves (directMetric).
func directRead(ctx context.Context, c *harness.Cluster, port int, ns, variant string) (int64, error) {
	m, err := directMetric(ctx, c, port, ns, variant)
	if err != nil {
		return 0, err
	}
	return m.Value.Value(), nil
}
