/*
Copyright The WVA Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// fullVA returns a VariantAutoscaling with every field set. Times are
// truncated to seconds because metav1.Time serializes as RFC 3339.
func fullVA() *VariantAutoscaling {
	now := metav1.NewTime(time.Date(2025, 6, 1, 12, 30, 45, 0, time.UTC))
	later := metav1.NewTime(now.Add(90 * time.Second))
	mem := resource.MustParse("80Gi")
	return &VariantAutoscaling{
		TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: VariantAutoscalingKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "llama-8b-h100",
			Namespace: "inference",
			Labels:    map[string]string{"app": "llama"},
		},
		Spec: VariantAutoscalingSpec{
			ScaleTargetRef: CrossVersionObjectReference{
				APIVersion: AppsAPIVersion,
				Kind:       ScaleTargetKindDeployment,
				Name:       "llama-8b",
			},
			ModelID:             "meta/llama-3.1-8b",
			MinReplicas:         int32Ptr(0),
			MaxReplicas:         5,
			VariantCost:         "42.5",
			AcceleratorName:     "H100",
			GPUsPerReplica:      int32Ptr(2),
			GPUMemoryPerReplica: &mem,
		},
		Status: VariantAutoscalingStatus{
			DesiredOptimizedAlloc: OptimizedAlloc{
				NumReplicas: 3,
				Reason:      "saturation",
				Accelerator: "H100",
				LastRunTime: later,
				LastUpdate:  now,
			},
			CurrentReplicas: 2,
			Actuation:       ActuationStatus{Applied: true},
			Conditions: []metav1.Condition{{
				Type:               ConditionTypeTargetResolved,
				Status:             metav1.ConditionTrue,
				Reason:             ReasonTargetFound,
				Message:            "Deployment llama-8b found",
				LastTransitionTime: now,
				ObservedGeneration: 4,
			}, {
				Type:               ConditionTypeMetricsAvailable,
				Status:             metav1.ConditionFalse,
				Reason:             ReasonMetricsStale,
				LastTransitionTime: later,
			}},
		},
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	return s
}

func TestGroupVersion(t *testing.T) {
	assert.Equal(t, "llmd.ai", SchemeGroupVersion.Group)
	assert.Equal(t, "v1alpha1", SchemeGroupVersion.Version)
	assert.Equal(t, SchemeGroupVersion, GroupVersion)
	assert.Equal(t, schema.GroupVersionKind{Group: "llmd.ai", Version: "v1alpha1", Kind: "VariantAutoscaling"}, VariantAutoscalingGVK)
	assert.Equal(t, schema.GroupVersionResource{Group: "llmd.ai", Version: "v1alpha1", Resource: "variantautoscalings"}, VariantAutoscalingGVR)
	assert.Equal(t, schema.GroupKind{Group: "llmd.ai", Kind: "VariantAutoscaling"}, Kind(VariantAutoscalingKind))
	assert.Equal(t, schema.GroupResource{Group: "llmd.ai", Resource: "variantautoscalings"}, Resource(VariantAutoscalingResource))
}

func TestSchemeRegistration(t *testing.T) {
	s := newScheme(t)
	tests := []struct {
		name string
		obj  runtime.Object
		kind string
	}{
		{"object", &VariantAutoscaling{}, VariantAutoscalingKind},
		{"list", &VariantAutoscalingList{}, VariantAutoscalingListKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gvks, unversioned, err := s.ObjectKinds(tc.obj)
			require.NoError(t, err)
			assert.False(t, unversioned)
			require.Len(t, gvks, 1)
			assert.Equal(t, SchemeGroupVersion.WithKind(tc.kind), gvks[0])

			got, err := s.New(SchemeGroupVersion.WithKind(tc.kind))
			require.NoError(t, err)
			assert.IsType(t, tc.obj, got)
		})
	}
	// metav1.AddToGroupVersion registers the meta types (e.g. ListOptions)
	// under the group version, as clients expect.
	assert.True(t, s.Recognizes(SchemeGroupVersion.WithKind("ListOptions")))
	assert.True(t, s.Recognizes(SchemeGroupVersion.WithKind("DeleteOptions")))
}

func TestSchemeRoundTrip(t *testing.T) {
	s := newScheme(t)
	codecs := serializer.NewCodecFactory(s, serializer.EnableStrict)

	minimal := &VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Name: "min", Namespace: "default"},
		Spec: VariantAutoscalingSpec{
			ScaleTargetRef: CrossVersionObjectReference{Kind: ScaleTargetKindLeaderWorkerSet, Name: "lws"},
			ModelID:        "m",
		},
	}
	list := &VariantAutoscalingList{
		ListMeta: metav1.ListMeta{ResourceVersion: "17"},
		Items:    []VariantAutoscaling{*fullVA(), *minimal},
	}
	tests := []struct {
		name      string
		mediaType string
		obj       runtime.Object
	}{
		{"full json", runtime.ContentTypeJSON, fullVA()},
		{"full yaml", runtime.ContentTypeYAML, fullVA()},
		{"minimal json", runtime.ContentTypeJSON, minimal},
		{"list json", runtime.ContentTypeJSON, list},
		{"list yaml", runtime.ContentTypeYAML, list},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), tc.mediaType)
			require.True(t, ok, "no serializer for %s", tc.mediaType)
			enc := codecs.EncoderForVersion(info.Serializer, SchemeGroupVersion)
			data, err := runtime.Encode(enc, tc.obj)
			require.NoError(t, err)

			// Decode with the strict universal decoder: unknown or duplicate
			// fields would fail here.
			got, gvk, err := codecs.UniversalDecoder(SchemeGroupVersion).Decode(data, nil, nil)
			require.NoError(t, err, "encoded:\n%s", data)
			require.NotNil(t, gvk)
			assert.Equal(t, SchemeGroupVersion.Group, gvk.Group)

			// The encoder sets TypeMeta on the way out; compare on that basis.
			want := tc.obj.DeepCopyObject()
			want.GetObjectKind().SetGroupVersionKind(*gvk)
			got.GetObjectKind().SetGroupVersionKind(*gvk)
			assert.True(t, equality.Semantic.DeepEqual(want, got), "round trip changed the object:\nwant %#v\ngot  %#v\nencoded:\n%s", want, got, data)
		})
	}
}

func TestJSONFieldNames(t *testing.T) {
	s := newScheme(t)
	codecs := serializer.NewCodecFactory(s)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	require.True(t, ok)
	data, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, SchemeGroupVersion), fullVA())
	require.NoError(t, err)
	for _, field := range []string{
		`"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"llama-8b"}`,
		`"modelID":"meta/llama-3.1-8b"`,
		`"minReplicas":0`,
		`"maxReplicas":5`,
		`"variantCost":"42.5"`,
		`"acceleratorName":"H100"`,
		`"gpusPerReplica":2`,
		`"gpuMemoryPerReplica":"80Gi"`,
		`"desiredOptimizedAlloc":{"numReplicas":3,"reason":"saturation","accelerator":"H100","lastRunTime":"2025-06-01T12:32:15Z","lastUpdate":"2025-06-01T12:30:45Z"}`,
		`"currentReplicas":2`,
		`"actuation":{"applied":true}`,
		`"conditions":[{"type":"TargetResolved"`,
	} {
		assert.Contains(t, string(data), field)
	}
}

func TestDeepCopyIndependence(t *testing.T) {
	orig := fullVA()
	cp := orig.DeepCopy()
	require.True(t, equality.Semantic.DeepEqual(orig, cp))

	mutations := []struct {
		name   string
		mutate func(va *VariantAutoscaling)
	}{
		{"labels", func(va *VariantAutoscaling) { va.Labels["app"] = "other" }},
		{"minReplicas pointee", func(va *VariantAutoscaling) { *va.Spec.MinReplicas = 7 }},
		{"gpusPerReplica pointee", func(va *VariantAutoscaling) { *va.Spec.GPUsPerReplica = 8 }},
		{"gpuMemoryPerReplica pointee", func(va *VariantAutoscaling) { va.Spec.GPUMemoryPerReplica.Add(resource.MustParse("1Gi")) }},
		{"scaleTargetRef", func(va *VariantAutoscaling) { va.Spec.ScaleTargetRef.Name = "changed" }},
		{"condition element", func(va *VariantAutoscaling) { va.Status.Conditions[0].Status = metav1.ConditionUnknown }},
		{"condition time", func(va *VariantAutoscaling) {
			va.Status.Conditions[1].LastTransitionTime = metav1.NewTime(time.Unix(0, 0))
		}},
		{"conditions append", func(va *VariantAutoscaling) {
			va.Status.Conditions = append(va.Status.Conditions[:1], metav1.Condition{Type: ConditionTypeOptimizationReady})
		}},
		{"desired alloc", func(va *VariantAutoscaling) { va.Status.DesiredOptimizedAlloc.NumReplicas = 99 }},
	}
	for _, tc := range mutations {
		t.Run(tc.name, func(t *testing.T) {
			cp := orig.DeepCopy()
			tc.mutate(cp)
			assert.True(t, equality.Semantic.DeepEqual(fullVA(), orig), "mutating the copy changed the original")
			assert.False(t, equality.Semantic.DeepEqual(orig, cp), "mutation did not take")
		})
	}

	t.Run("DeepCopyObject", func(t *testing.T) {
		obj := orig.DeepCopyObject()
		va, ok := obj.(*VariantAutoscaling)
		require.True(t, ok)
		assert.NotSame(t, orig, va)
		assert.True(t, equality.Semantic.DeepEqual(orig, va))
	})

	t.Run("list", func(t *testing.T) {
		l := &VariantAutoscalingList{Items: []VariantAutoscaling{*fullVA()}}
		obj := l.DeepCopyObject()
		lc, ok := obj.(*VariantAutoscalingList)
		require.True(t, ok)
		*lc.Items[0].Spec.MinReplicas = 9
		lc.Items[0].Status.Conditions[0].Reason = "X"
		assert.Equal(t, int32(0), *l.Items[0].Spec.MinReplicas)
		assert.Equal(t, ReasonTargetFound, l.Items[0].Status.Conditions[0].Reason)
	})

	t.Run("nil", func(t *testing.T) {
		var va *VariantAutoscaling
		assert.Nil(t, va.DeepCopy())
		assert.Nil(t, va.DeepCopyObject())
		var l *VariantAutoscalingList
		assert.Nil(t, l.DeepCopy())
		assert.Nil(t, l.DeepCopyObject())
	})
}

func TestMinReplicasOrDefault(t *testing.T) {
	tests := []struct {
		name string
		min  *int32
		want int32
	}{
		{"unset", nil, DefaultMinReplicas},
		{"zero (scale to zero)", int32Ptr(0), 0},
		{"explicit", int32Ptr(3), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			va := &VariantAutoscaling{Spec: VariantAutoscalingSpec{MinReplicas: tc.min}}
			assert.Equal(t, tc.want, va.MinReplicasOrDefault())
		})
	}
	assert.Equal(t, int32(1), DefaultMinReplicas)
}

func TestMaxReplicasOrDefault(t *testing.T) {
	tests := []struct {
		name string
		max  int32
		want int32
	}{
		{"unset", 0, DefaultMaxReplicas},
		{"one", 1, 1},
		{"explicit", 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			va := &VariantAutoscaling{Spec: VariantAutoscalingSpec{MaxReplicas: tc.max}}
			assert.Equal(t, tc.want, va.MaxReplicasOrDefault())
		})
	}
	assert.Equal(t, int32(2), DefaultMaxReplicas)
}

func TestCostValue(t *testing.T) {
	tests := []struct {
		cost    string
		want    float64
		wantErr string
	}{
		{cost: "", want: 10},
		{cost: "10.0", want: 10},
		{cost: "0", want: 0},
		{cost: "0.0", want: 0},
		{cost: "3", want: 3},
		{cost: "0.25", want: 0.25},
		{cost: "007.50", want: 7.5},
		{cost: "123456.125", want: 123456.125},
		{cost: "999999.999999", want: 999999.999999},
		{cost: "1000000", want: MaxVariantCost},
		{cost: "1000000.000", want: MaxVariantCost},
		{cost: "0001000000", want: MaxVariantCost},
		{cost: "00000010", want: 10},

		// Above MaxVariantCost: sums over replicas and variants would
		// overflow (1e308) or lose the cheaper mix.
		{cost: "1000000.5", wantErr: "must be at most 1000000"},
		{cost: "1000001", wantErr: "must be at most 1000000"},
		{cost: "123456789.125", wantErr: "must be at most 1000000"},
		{cost: "1" + strings.Repeat("0", 308), wantErr: "must be at most 1000000"},
		{cost: "1" + strings.Repeat("0", 400), wantErr: "must be at most 1000000"},

		{cost: "-1", wantErr: "non-negative decimal"},
		{cost: "-0.5", wantErr: "non-negative decimal"},
		{cost: "+1", wantErr: "non-negative decimal"},
		{cost: "1e3", wantErr: "non-negative decimal"},
		{cost: "1E3", wantErr: "non-negative decimal"},
		{cost: "NaN", wantErr: "non-negative decimal"},
		{cost: "Inf", wantErr: "non-negative decimal"},
		{cost: "0x10", wantErr: "non-negative decimal"},
		{cost: "1_000", wantErr: "non-negative decimal"},
		{cost: "1,5", wantErr: "non-negative decimal"},
		{cost: "1.", wantErr: "non-negative decimal"},
		{cost: ".5", wantErr: "non-negative decimal"},
		{cost: " 1", wantErr: "non-negative decimal"},
		{cost: "1 ", wantErr: "non-negative decimal"},
		{cost: "1.2.3", wantErr: "non-negative decimal"},
		{cost: "ten", wantErr: "non-negative decimal"},
		{cost: "١", wantErr: "non-negative decimal"}, // Arabic-Indic digit one
	}
	for _, tc := range tests {
		t.Run("cost="+tc.cost, func(t *testing.T) {
			va := &VariantAutoscaling{Spec: VariantAutoscalingSpec{VariantCost: tc.cost}}
			got, err := va.CostValue()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "invalid variantCost")
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.False(t, math.IsInf(got, 0) || math.IsNaN(got))
		})
	}
	def, err := ParseVariantCost(DefaultVariantCost)
	require.NoError(t, err)
	assert.Equal(t, 10.0, def)
}

func TestScaleTargetGroupVersionKind(t *testing.T) {
	tests := []struct {
		name    string
		ref     CrossVersionObjectReference
		want    schema.GroupVersionKind
		wantErr string
	}{
		{
			name: "deployment default apiVersion",
			ref:  CrossVersionObjectReference{Kind: ScaleTargetKindDeployment, Name: "d"},
			want: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		},
		{
			name: "statefulset default apiVersion",
			ref:  CrossVersionObjectReference{Kind: ScaleTargetKindStatefulSet, Name: "s"},
			want: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		},
		{
			name: "leaderworkerset default apiVersion",
			ref:  CrossVersionObjectReference{Kind: ScaleTargetKindLeaderWorkerSet, Name: "l"},
			want: schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"},
		},
		{
			name: "explicit apiVersion kept",
			ref:  CrossVersionObjectReference{APIVersion: "apps/v1beta2", Kind: ScaleTargetKindDeployment, Name: "d"},
			want: schema.GroupVersionKind{Group: "apps", Version: "v1beta2", Kind: "Deployment"},
		},
		{
			name:    "unsupported kind",
			ref:     CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "r"},
			wantErr: `unsupported scaleTargetRef kind "ReplicationController"`,
		},
		{
			name:    "empty kind",
			ref:     CrossVersionObjectReference{Name: "r"},
			wantErr: "unsupported scaleTargetRef kind",
		},
		{
			name:    "malformed apiVersion",
			ref:     CrossVersionObjectReference{APIVersion: "a/b/c", Kind: ScaleTargetKindDeployment, Name: "d"},
			wantErr: `invalid scaleTargetRef apiVersion "a/b/c"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ref.GroupVersionKind()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func int32Ptr(v int32) *int32 { return &v }
