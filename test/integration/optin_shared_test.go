package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wva-project/wva/pkg/adapter"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/testenv"
)

// TestOptInDecisionsSharedAcrossReplicas: two adapter replicas, one
// Lease, an HPA opted in by annotations (no VA). The leader persists its
// decision in wva-optin-decisions and the follower serves it through its
// own external metrics API; when the leader stops, the follower serves the
// last decision without a gap, then decides itself (decidedAt moves on).
func TestOptInDecisionsSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, _ := startCluster(ctx, t, "wva-system", "prod")

	// As in TestHPAOptInByAnnotations: two Ready pods at KV 0.5, threshold
	// 0.55 / trigger 0.10, so the engine decides 3 for a Deployment at 2
	// (no controller moves it, so every leader decides 3 again).
	const model = "meta/llama-3.1-8b"
	prom := optInFleet(ctx, t, cs, model)
	const name = "llama-upstream"
	_, err := cs.AutoscalingV2().HorizontalPodAutoscalers("prod").Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Annotations: map[string]string{
			llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: model, llmdv1alpha1.AnnotationVariantCost: "5"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: llmdv1alpha1.MetricDesiredReplicas,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{llmdv1alpha1.MetricLabelVariantName: name}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(1, resource.DecimalSI)},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pair := startAdapterPair(ctx, t, cluster, prom.URL)
	leader, follower := pair.Leader, pair.Follower

	// Both replicas serve the leader's decision.
	for _, p := range []*adapterProcess{leader, follower} {
		testenv.Eventually(ctx, t, "each replica serves the opted-in HPA's decision, 3", func() (bool, string) {
			m, err := directMetric(ctx, cluster, p.Port, "prod", name)
			return err == nil && m.Value.Value() == 3, fmt_(m, err)
		})
	}
	cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, adapter.OptInDecisionsConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, cm.Data, 1)
	var persisted struct {
		Namespace, Name, Kind string
		Desired               int32       `json:"desiredReplicas"`
		DecidedAt             metav1.Time `json:"decidedAt"`
	}
	for _, v := range cm.Data {
		require.NoError(t, json.Unmarshal([]byte(v), &persisted))
	}
	assert.Equal(t, "prod", persisted.Namespace)
	assert.Equal(t, name, persisted.Name)
	assert.Equal(t, "HorizontalPodAutoscaler", persisted.Kind)
	assert.Equal(t, int32(3), persisted.Desired)

	// Poll the follower from before the leader stops until it has decided
	// itself: every answer is the decision, none NotFound.
	var (
		mu      sync.Mutex
		answers []string
		last    metav1.Time
	)
	pollCtx, stopPolling := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pollCtx.Err() == nil {
			m, err := directMetric(pollCtx, cluster, follower.Port, "prod", name)
			mu.Lock()
			switch {
			case pollCtx.Err() != nil:
			case err != nil || m.Value.Value() != 3:
				answers = append(answers, fmt_(m, err))
			default:
				last = m.Timestamp
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	stopped := pair.StopLeader(ctx, t)
	// lastRunTime has whole seconds: a decision after the stop is the new
	// leader's.
	testenv.Eventually(ctx, t, "the new leader's own decision is served", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return last.Time.After(stopped.Add(time.Second)), last.String()
	})
	stopPolling()
	<-done
	assert.Empty(t, answers, "the follower answered something else than the last decision")
	assert.Contains(t, follower.Log(), "restored opted-in decisions")
}
