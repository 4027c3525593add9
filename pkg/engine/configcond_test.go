package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
)

// A broken ConfigMap entry shows on the VAs it concerns as ConfigValid=False
// naming the ConfigMap, the key and the error; fixing it sets True again.
func TestRunOnceConfigValidCondition(t *testing.T) {
	cases := []struct {
		name        string
		data        map[string]string
		llama, qwen metav1.ConditionStatus
	}{
		{"all valid", map[string]string{config.DefaultKey: "kvCacheThreshold: 0.7"}, metav1.ConditionTrue, metav1.ConditionTrue},
		{"broken default concerns every model", map[string]string{config.DefaultKey: "kvCacheThreshold: 7"}, metav1.ConditionFalse, metav1.ConditionFalse},
		{"broken override concerns its model only", map[string]string{"llama": "model_id: llama\nkvCacheThreshold: 7"}, metav1.ConditionFalse, metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			views := &fakeViews{views: []decide.View{{VA: va("prod", "l4", "llama", "5", 1, 5), Target: resolved(2, "p1", "p2")},
				{VA: va("prod", "q", "qwen", "5", 1, 5), Target: resolved(0)}}}
			e := testEngine(views, clocktesting.NewFakeClock(t0))
			_ = e.Config.Apply(config.SaturationConfigMapName, tc.data)
			_, err := e.RunOnce(context.Background())
			require.NoError(t, err)
			writes := e.Status.(*fakeWriter).writes
			for name, want := range map[string]metav1.ConditionStatus{"l4": tc.llama, "q": tc.qwen} {
				c := meta.FindStatusCondition(writes[name].Conditions, llmdv1alpha1.ConditionTypeConfigValid)
				require.NotNil(t, c, name)
				assert.Equal(t, want, c.Status, name)
				// ClientStatusWriter writes only the engine's conditions.
				var merged llmdv1alpha1.VariantAutoscalingStatus
				MergeEngineStatus(&merged, writes[name])
				assert.NotNil(t, meta.FindStatusCondition(merged.Conditions, llmdv1alpha1.ConditionTypeConfigValid), "ConfigValid is engine-owned")
				if want == metav1.ConditionFalse {
					assert.Equal(t, llmdv1alpha1.ReasonInvalidConfig, c.Reason)
					assert.Contains(t, c.Message, "ConfigMap wva-saturation-scaling-config key")
					assert.Contains(t, c.Message, "kvCacheThreshold=7: must be in (0, 1]")
				} else {
					assert.Equal(t, llmdv1alpha1.ReasonConfigApplied, c.Reason)
				}
			}
		})
	}
}
