package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// TestKubectlGetVA asks the real API server for the Table `kubectl get va`
// prints: a newcomer sees current and desired replicas, whether metrics
// are available, and the reason, without -o wide.
func TestKubectlGetVA(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, cs, wva := startCluster(ctx, t, "prod")
	va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama-70b", "5", 1, 8), metav1.CreateOptions{})
	require.NoError(t, err)
	const reason = "scale-up +1 on cheapest eligible variant (cost 5.00 per replica): saturation: avg spare KV 0.083 < trigger 0.100"
	va.Status = llmdv1alpha1.VariantAutoscalingStatus{
		CurrentReplicas:       2,
		DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: 3, Reason: reason, LastRunTime: metav1.Now(), LastUpdate: metav1.Now()},
		Conditions: []metav1.Condition{{Type: llmdv1alpha1.ConditionTypeMetricsAvailable, Status: metav1.ConditionFalse,
			Reason: llmdv1alpha1.ReasonMetricsMissingWithReadyPods, Message: "no series", LastTransitionTime: metav1.Now()}},
	}
	_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").UpdateStatus(ctx, va, metav1.UpdateOptions{})
	require.NoError(t, err)

	var table metav1.Table
	require.NoError(t, cs.Discovery().RESTClient().Get().AbsPath("/apis/llmd.ai/v1alpha1/namespaces/prod/variantautoscalings").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(&table))
	require.Len(t, table.Rows, 1)
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cells[c.Name] = table.Rows[0].Cells[i]
		}
	}
	assert.Equal(t, "llama-l4", cells["Name"])
	assert.EqualValues(t, 2, cells["Current"])
	assert.EqualValues(t, 3, cells["Desired"])
	assert.Equal(t, "False", cells["Metrics"])
	assert.Equal(t, reason, cells["Reason"])
}
