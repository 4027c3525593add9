package scalefromzero

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakescale "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSubresourceScaler(t *testing.T) {
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	lws := schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploy, meta.RESTScopeNamespace)
	mapper.Add(lws, meta.RESTScopeNamespace)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "l4", nil)

	tests := []struct {
		name       string
		gvk        schema.GroupVersionKind
		patchErr   error
		live       int32
		wantScaled bool
		wantErr    string
		wantVerbs  []string
	}{
		{name: "conditional patch accepted", gvk: deploy, wantScaled: true, wantVerbs: []string{"patch"}},
		{name: "LeaderWorkerSet through the same subresource", gvk: lws, wantScaled: true, wantVerbs: []string{"patch"}},
		{name: "stale cache, someone scaled it meanwhile", gvk: deploy, patchErr: conflict, live: 3, wantVerbs: []string{"patch", "get"}},
		{name: "stale cache, still at zero", gvk: deploy, patchErr: conflict, live: 0, wantScaled: true, wantVerbs: []string{"patch", "get", "update"}},
		{name: "forbidden", gvk: deploy, patchErr: apierrors.NewForbidden(schema.GroupResource{Resource: "deployments/scale"}, "l4", nil),
			wantErr: "scale Deployment prod/l4 to 1", wantVerbs: []string{"patch"}},
		{name: "unknown kind", gvk: schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "Nope"}, wantErr: "resource for x/v1, Kind=Nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &fakescale.FakeScaleClient{}
			var patch string
			client.AddReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				patch = string(a.(k8stesting.PatchAction).GetPatch())
				return true, &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 1}}, tt.patchErr
			})
			client.AddReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "l4", ResourceVersion: "7"}, Spec: autoscalingv1.ScaleSpec{Replicas: tt.live}}, nil
			})
			var updated *autoscalingv1.Scale
			client.AddReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				updated = a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
				return true, updated, nil
			})
			s := SubresourceScaler{Scales: client, Mapper: mapper}
			scaled, err := s.ScaleFromZero(context.Background(), Target{GVK: tt.gvk, Namespace: "prod", Name: "l4", ResourceVersion: "5"})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantScaled, scaled)
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
				assert.Equal(t, "scale", a.GetSubresource())
			}
			assert.Equal(t, tt.wantVerbs, verbs)
			if len(verbs) > 0 {
				assert.JSONEq(t, `{"metadata":{"resourceVersion":"5"},"spec":{"replicas":1}}`, patch)
			}
			if updated != nil {
				assert.Equal(t, int32(1), updated.Spec.Replicas)
				assert.Equal(t, "7", updated.ResourceVersion, "the update is conditional on the live version")
			}
		})
	}
}
