package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

const scalerAddr = "wva-adapter.wva-system.svc:9090"

func TestDesiredScaledObject(t *testing.T) {
	cases := []struct {
		name     string
		va       *llmdv1alpha1.VariantAutoscaling
		address  string
		auth     *KedaAuthenticationRef
		min, max int64
		downStab int64
		errText  string
	}{
		{name: "authenticationRef for TLS", va: testVA(1, 8, nil), address: scalerAddr,
			auth: &KedaAuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "wva-keda-scaler"}, min: 1, max: 8, downStab: 30},
		{name: "min 0 goes to KEDA as is", va: testVA(0, 8, nil), address: scalerAddr, min: 0, max: 8, downStab: 30},
		{name: "min and max from the VA", va: testVA(2, 5, nil), address: scalerAddr, min: 2, max: 5, downStab: 30},
		{name: "behavior annotation reaches KEDA's HPA", va: testVA(1, 8, map[string]string{llmdv1alpha1.AnnotationHPABehavior: "scaleDown:\n  stabilizationWindowSeconds: 120"}),
			address: scalerAddr, min: 1, max: 8, downStab: 120},
		{name: "invalid annotation falls back with an error", va: testVA(1, 8, map[string]string{llmdv1alpha1.AnnotationHPABehavior: "scaleDown: {stabilisation: 1}"}),
			address: scalerAddr, min: 1, max: 8, downStab: 30, errText: "annotation wva.llmd.ai/hpa-behavior"},
		{name: "no scaler address", va: testVA(1, 8, nil), errText: "--keda-scaler-address is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			so, err := DesiredScaledObject(tc.va, KedaScaler{Address: tc.address, Authentication: tc.auth})
			if tc.errText != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errText)
			} else {
				require.NoError(t, err)
			}
			if tc.address == "" {
				assert.Nil(t, so)
				return
			}
			assert.Equal(t, "keda.sh/v1alpha1", so.GetAPIVersion())
			assert.Equal(t, "ScaledObject", so.GetKind())
			assert.Equal(t, "llama-l4", so.GetName())
			assert.Equal(t, "prod", so.GetNamespace())
			assert.Equal(t, map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA, llmdv1alpha1.LabelVariantAutoscaling: "llama-l4"}, so.GetLabels())
			require.Len(t, so.GetOwnerReferences(), 1)
			assert.Equal(t, "VariantAutoscaling", so.GetOwnerReferences()[0].Kind)
			assert.True(t, *so.GetOwnerReferences()[0].Controller)

			spec := so.Object["spec"].(map[string]any)
			assert.Equal(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-l4-deploy"}, spec["scaleTargetRef"])
			assert.Equal(t, tc.min, spec["minReplicaCount"])
			assert.Equal(t, tc.max, spec["maxReplicaCount"])
			trigger := map[string]any{"type": "external-push", "name": "wva", "metadata": map[string]any{
				"scalerAddress": scalerAddr, "namespace": "prod", "variantAutoscaling": "llama-l4"}}
			if tc.auth != nil {
				trigger["authenticationRef"] = map[string]any{"kind": tc.auth.Kind, "name": tc.auth.Name}
			}
			assert.Equal(t, []any{trigger}, spec["triggers"])
			down, _, _ := unstructured.NestedInt64(so.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "stabilizationWindowSeconds")
			assert.Equal(t, tc.downStab, down)
			_, hasTol, _ := unstructured.NestedFieldNoCopy(so.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleUp", "tolerance")
			assert.False(t, hasTol, "no tolerance: KEDA CRDs without the field would prune it and never compare equal")
		})
	}
}

// roundTrip is what the API server hands back: JSON-decoded, so every
// number is int64 and every map map[string]any.
func roundTrip(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(u.Object)
	require.NoError(t, err)
	out := &unstructured.Unstructured{}
	require.NoError(t, out.UnmarshalJSON(raw))
	return out
}

func TestScaledObjectInSyncAndApply(t *testing.T) {
	desired, err := DesiredScaledObject(testVA(1, 8, nil),
		KedaScaler{Address: scalerAddr, Authentication: &KedaAuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "wva-keda-scaler"}})
	require.NoError(t, err)
	live := roundTrip(t, desired)
	live.SetLabels(map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA, llmdv1alpha1.LabelVariantAutoscaling: "llama-l4", "team": "inference"})
	require.NoError(t, unstructured.SetNestedField(live.Object, int64(15), "spec", "pollingInterval"))
	require.NoError(t, unstructured.SetNestedField(live.Object, "True", "status", "conditions"))

	cases := []struct {
		name   string
		mutate func(*unstructured.Unstructured)
		inSync bool
	}{
		{name: "as the API server returns it, with user fields", mutate: func(*unstructured.Unstructured) {}, inSync: true},
		{name: "hand-edited max", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(99), "spec", "maxReplicaCount")
		}, inSync: false},
		{name: "trigger pointed elsewhere", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "prometheus", "metadata": map[string]any{}}}, "spec", "triggers")
		}, inSync: false},
		{name: "authenticationRef removed (KEDA would dial without TLS)", mutate: func(u *unstructured.Unstructured) {
			triggers, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers")
			delete(triggers[0].(map[string]any), "authenticationRef")
			_ = unstructured.SetNestedSlice(u.Object, triggers, "spec", "triggers")
		}, inSync: false},
		{name: "behavior removed", mutate: func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "advanced") }, inSync: false},
		{name: "managed-by label removed", mutate: func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "inference"}) }, inSync: false},
		{name: "not owned", mutate: func(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) }, inSync: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edited := live.DeepCopy()
			tc.mutate(edited)
			assert.Equal(t, tc.inSync, ScaledObjectInSync(edited, desired))
			fixed := roundTrip(t, ApplyScaledObject(edited, desired))
			assert.True(t, ScaledObjectInSync(fixed, desired), "Apply repairs it")
			poll, _, _ := unstructured.NestedInt64(fixed.Object, "spec", "pollingInterval")
			assert.Equal(t, int64(15), poll, "user's pollingInterval kept")
			_, hasStatus, _ := unstructured.NestedFieldNoCopy(fixed.Object, "status")
			assert.True(t, hasStatus, "status kept")
		})
	}
}

func TestPlanDirectScaleForScaledObjects(t *testing.T) {
	cases := []struct {
		name    string
		output  Output
		va      *llmdv1alpha1.VariantAutoscaling
		current int32
		want    int32
		act     bool
	}{
		{"hpa mode: to 0", OutputHPA, decided(testVA(0, 8, nil), 0, time.Second), 3, 0, true},
		{"scaledobject mode: KEDA scales to 0", OutputScaledObject, decided(testVA(0, 8, nil), 0, time.Second), 3, 0, false},
		{"hpa mode: from 0", OutputHPA, decided(testVA(0, 8, nil), 2, time.Second), 0, 2, true},
		{"scaledobject mode: KEDA scales from 0", OutputScaledObject, decided(testVA(0, 8, nil), 2, time.Second), 0, 0, false},
		{"scaledobject mode: in-band step still taken", OutputScaledObject, decided(testVA(1, 30, nil), 21, time.Second), 20, 21, true},
		{"scaledobject mode: out of band is KEDA's HPA's", OutputScaledObject, decided(testVA(1, 30, nil), 5, time.Second), 2, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, act := PlanDirectScaleFor(tc.output, tc.va, Capabilities{}, tc.current, now, 5*time.Minute)
			assert.Equal(t, tc.act, act)
			assert.Equal(t, tc.want, plan.Replicas)
		})
	}
}

func TestOptionsValidateOutput(t *testing.T) {
	cases := []struct {
		output, address, auth string
		errText               string
	}{
		{output: "scaledobject", address: scalerAddr, auth: "ClusterTriggerAuthentication/wva-keda-scaler"},
		{output: "scaledobject", address: scalerAddr, auth: "Secret/x", errText: `--keda-trigger-authentication="Secret/x": kind "Secret"`},
		{output: "hpa"},
		{output: "scaledobject", address: scalerAddr},
		{output: "scaledobject", errText: `--keda-scaler-address="": --output=scaledobject needs`},
		{output: "scaledobject", address: "wva-adapter", errText: `--keda-scaler-address="wva-adapter"`},
		{output: "keda", errText: `--output="keda": want hpa or scaledobject`},
	}
	for _, tc := range cases {
		t.Run(tc.output+" "+tc.address+" "+tc.auth, func(t *testing.T) {
			o := NewOptions()
			o.Output, o.KedaScalerAddress, o.KedaAuthentication = tc.output, tc.address, tc.auth
			err := o.Validate()
			if tc.errText == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errText)
			}
		})
	}
}

func TestCompetingHPAInScaledObjectMode(t *testing.T) {
	va := testVA(1, 8, nil)
	target := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4-deploy"}
	hpa := func(name string, owner metav1.OwnerReference) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MaxReplicas: 8},
		}
	}
	cases := []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		want string
	}{
		{name: "KEDA's HPA for wva's ScaledObject", want: "",
			hpa: hpa("keda-hpa-llama-l4", metav1.OwnerReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Name: "llama-l4"})},
		{name: "KEDA's HPA for someone else's ScaledObject", want: "HPA keda-hpa-other",
			hpa: hpa("keda-hpa-other", metav1.OwnerReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Name: "other"})},
		{name: "a hand-made HPA on the target", want: "HPA mine",
			hpa: hpa("mine", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"})},
		{name: "wva's own HPA of the same name", want: "", hpa: hpa("llama-l4", vaOwnerRef(va))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if other := competingHPA(va, []*autoscalingv2.HorizontalPodAutoscaler{tc.hpa}); other != nil {
				got = other.what
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseKedaAuthenticationRef(t *testing.T) {
	cases := []struct {
		in      string
		want    *KedaAuthenticationRef
		errText string
	}{
		{in: ""},
		{in: "wva-keda-scaler", want: &KedaAuthenticationRef{Name: "wva-keda-scaler"}},
		{in: "TriggerAuthentication/wva", want: &KedaAuthenticationRef{Kind: "TriggerAuthentication", Name: "wva"}},
		{in: "ClusterTriggerAuthentication/wva-keda-scaler", want: &KedaAuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "wva-keda-scaler"}},
		{in: "Secret/wva", errText: `kind "Secret"`},
		{in: "ClusterTriggerAuthentication/", errText: `name ""`},
		{in: "ClusterTriggerAuthentication/Bad_Name", errText: `name "Bad_Name"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseKedaAuthenticationRef(tc.in)
			if tc.errText != "" {
				assert.ErrorContains(t, err, tc.errText)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
