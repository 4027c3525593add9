package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func TestNextStatusLastUpdateMovesOnlyOnReplicaChange(t *testing.T) {
	v := va("prod", "a", "m", "5", 1, 4)
	v.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 2, Reason: "old", LastUpdate: metav1.NewTime(t0.Add(-time.Hour)), LastRunTime: metav1.NewTime(t0.Add(-time.Minute))}
	v.Status.Actuation.Applied = true
	plan := Plan{Key: GroupKey{"prod", "m"}, Input: pipelineInput(MetricsAvailable)}
	res := resultWith(2, "steady now")
	st := NextStatus(v, plan, res, res.Targets[0], resolved(2, "p1", "p2"), nil, t0)
	assert.Equal(t, t0.Add(-time.Hour), st.DesiredOptimizedAlloc.LastUpdate.Time, "same replicas, new reason: lastUpdate stays")
	assert.Equal(t, t0, st.DesiredOptimizedAlloc.LastRunTime.Time)
	assert.Equal(t, "steady now", st.DesiredOptimizedAlloc.Reason)
	assert.True(t, st.Actuation.Applied, "fields owned by the controller are kept")

	res = resultWith(3, "scale-up")
	st = NextStatus(v, plan, res, res.Targets[0], resolved(2, "p1", "p2"), nil, t0)
	assert.Equal(t, t0, st.DesiredOptimizedAlloc.LastUpdate.Time)
	assert.Equal(t, int32(3), st.DesiredOptimizedAlloc.NumReplicas)
	assert.True(t, meta.IsStatusConditionTrue(st.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable))
	assert.True(t, meta.IsStatusConditionTrue(st.Conditions, llmdv1alpha1.ConditionTypeTargetResolved))

	plan.Input.Metrics = MetricsUnreachable
	st = NextStatus(v, plan, res, res.Targets[0], resolved(2), errors.New("prometheus query kv_cache_usage: connection refused"), t0)
	c := meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, llmdv1alpha1.ReasonPrometheusError, c.Reason)
	assert.Contains(t, c.Message, "connection refused; previous decision held")
}
