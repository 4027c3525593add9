package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakescale "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned/fake"
)

// TestActuateRereadsVABeforeScalingToZero: the informer's VA may predate a
// wake whose replica the scale GET shows; the controller scales to 0 only
// on the VA as the API server has it.
func TestActuateRereadsVABeforeScalingToZero(t *testing.T) {
	decided := now.Add(-10 * time.Second)
	for _, tc := range []struct {
		name     string
		liveMark string // the marker on the API server; the cached copy has none
		wantZero bool
	}{
		{name: "woken after the decision", liveMark: now.Add(-time.Second).Format(time.RFC3339Nano)},
		{name: "woken before the decision", liveMark: decided.Add(-time.Minute).Format(time.RFC3339Nano), wantZero: true},
		{name: "never woken", wantZero: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := testVA(0, 4, nil)
			cached.Spec.ScaleTargetRef.APIVersion = "apps/v1"
			cached.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, LastRunTime: metav1.NewTime(decided), Reason: "idle"}
			live := cached.DeepCopy()
			if tc.liveMark != "" {
				live.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: tc.liveMark}
			}
			scales := &fakescale.FakeScaleClient{}
			scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llama-l4-deploy", ResourceVersion: "7"},
					Spec: autoscalingv1.ScaleSpec{Replicas: 1}}, nil
			})
			var updated []int32
			scales.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
				assert.Equal(t, "7", s.ResourceVersion, "conditional on the version read")
				updated = append(updated, s.Spec.Replicas)
				return true, s, nil
			})
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
			c := &Controller{WVA: fake.NewSimpleClientset(live), Scales: scales, Mapper: mapper, Recorder: record.NewFakeRecorder(10),
				Clock: clocktesting.NewFakeClock(now), StaleAfter: 5 * time.Minute}
			_, err := c.actuate(context.Background(), cached)
			require.NoError(t, err)
			if tc.wantZero {
				assert.Equal(t, []int32{0}, updated)
			} else {
				assert.Empty(t, updated, "a wake the cached VA missed is not undone")
			}
		})
	}
}
