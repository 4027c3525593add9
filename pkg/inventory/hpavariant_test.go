package inventory

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

func hpa(name, target string, annotations map[string]string, mutate ...func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 7,
		},
	}
	for _, m := range mutate {
		m(h)
	}
	return h
}

func managed(model string, extra ...string) map[string]string {
	a := map[string]string{llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: model}
	for i := 0; i+1 < len(extra); i += 2 {
		a[extra[i]] = extra[i+1]
	}
	return a
}

func TestFromHPA(t *testing.T) {
	cases := map[string]struct {
		hpa        *autoscalingv2.HorizontalPodAutoscaler
		notManaged bool
		errContain string
		min, max   int32
		cost       string
	}{
		"bounds from the HPA, default cost": {hpa: hpa("h", "d", managed("meta/llama")), min: 2, max: 7, cost: llmdv1alpha1.DefaultVariantCost},
		"cost annotation":                   {hpa: hpa("h", "d", managed("meta/llama", llmdv1alpha1.AnnotationVariantCost, "35.5")), min: 2, max: 7, cost: "35.5"},
		"minReplicas unset reads 1": {hpa: hpa("h", "d", managed("m"), func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = nil }),
			min: 1, max: 7, cost: llmdv1alpha1.DefaultVariantCost},
		"missing model-id": {hpa: hpa("h", "d", map[string]string{llmdv1alpha1.AnnotationManaged: "true"}), errContain: llmdv1alpha1.AnnotationModelID},
		"blank model-id":   {hpa: hpa("h", "d", managed("  ")), errContain: llmdv1alpha1.AnnotationModelID},
		"negative cost":    {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationVariantCost, "-1")), errContain: llmdv1alpha1.AnnotationVariantCost},
		"cost not a number": {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationVariantCost, "cheap")),
			errContain: llmdv1alpha1.AnnotationVariantCost},
		"cost at the bound": {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationVariantCost, "1000000")), min: 2, max: 7, cost: "1000000"},
		// Same parse as spec.variantCost: 1e308 would overflow the sums.
		"cost above the bound": {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationVariantCost, "1"+strings.Repeat("0", 308))),
			errContain: "must be at most 1000000"},
		"no annotations": {hpa: hpa("h", "d", nil), notManaged: true},
		"managed=false":  {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationManaged, "false")), notManaged: true},
		"model-id alone": {hpa: hpa("h", "d", map[string]string{llmdv1alpha1.AnnotationModelID: "m"}), notManaged: true},
		"wva's own HPA": {hpa: hpa("h", "d", managed("m"), func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Labels = map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA}
		}), notManaged: true},
		// KEDA copies a ScaledObject's annotations to the HPA it creates:
		// the ScaledObject is the variant, not that HPA.
		"KEDA's HPA for a ScaledObject": {hpa: hpa("keda-hpa-so", "d", managed("m"), func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Labels = map[string]string{llmdv1alpha1.LabelKEDAScaledObject: "so"}
		}), notManaged: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			va, err := FromHPA(c.hpa)
			switch {
			case c.notManaged:
				require.ErrorIs(t, err, ErrNotManaged)
				return
			case c.errContain != "":
				require.ErrorContains(t, err, c.errContain)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.hpa.Name, va.Name)
			assert.Equal(t, c.hpa.Namespace, va.Namespace)
			assert.Equal(t, c.hpa.UID, va.UID)
			assert.True(t, IsOptedIn(va))
			assert.Equal(t, c.hpa.Annotations[llmdv1alpha1.AnnotationModelID], va.Spec.ModelID)
			assert.Equal(t, llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}, va.Spec.ScaleTargetRef)
			assert.Equal(t, c.min, *va.Spec.MinReplicas)
			assert.Equal(t, c.max, va.Spec.MaxReplicas)
			assert.Equal(t, c.cost, va.Spec.VariantCost)
			_, err = va.CostValue()
			assert.NoError(t, err)
		})
	}
}

// scaledObject builds a ScaledObject as the API server returns it; spec
// holds alternating field names and values (name, kind, apiVersion of the
// scaleTargetRef; minReplicaCount, maxReplicaCount as int64).
func scaledObject(name string, annotations map[string]string, spec ...any) *unstructured.Unstructured {
	ref, sp := map[string]any{}, map[string]any{"triggers": []any{}}
	for i := 0; i+1 < len(spec); i += 2 {
		switch k := spec[i].(string); k {
		case "minReplicaCount", "maxReplicaCount":
			sp[k] = spec[i+1]
		default:
			ref[k] = spec[i+1]
		}
	}
	if len(ref) > 0 {
		sp["scaleTargetRef"] = ref
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": sp}}
	u.SetNamespace("prod")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetAnnotations(annotations)
	return u
}

func TestFromScaledObject(t *testing.T) {
	cases := map[string]struct {
		so         *unstructured.Unstructured
		notManaged bool
		errContain string
		target     llmdv1alpha1.CrossVersionObjectReference
		min, max   int32
		cost       string
	}{
		"bounds and target from the spec": {so: scaledObject("s", managed("meta/llama", llmdv1alpha1.AnnotationVariantCost, "12"),
			"apiVersion", "apps/v1", "kind", "StatefulSet", "name", "sts", "minReplicaCount", int64(1), "maxReplicaCount", int64(6)),
			target: llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "sts"}, min: 1, max: 6, cost: "12"},
		"KEDA's defaults: kind Deployment, min 0, max 100": {so: scaledObject("s", managed("m"), "name", "d"),
			target: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: "d"}, min: 0, max: 100, cost: llmdv1alpha1.DefaultVariantCost},
		"missing model-id": {so: scaledObject("s", map[string]string{llmdv1alpha1.AnnotationManaged: "true"}, "name", "d"),
			errContain: llmdv1alpha1.AnnotationModelID},
		"bad cost":          {so: scaledObject("s", managed("m", llmdv1alpha1.AnnotationVariantCost, "-3"), "name", "d"), errContain: llmdv1alpha1.AnnotationVariantCost},
		"no scaleTargetRef": {so: scaledObject("s", managed("m")), errContain: "scaleTargetRef.name"},
		"min not a number":  {so: scaledObject("s", managed("m"), "name", "d", "minReplicaCount", "two"), errContain: "minReplicaCount"},
		"no annotations":    {so: scaledObject("s", nil, "name", "d"), notManaged: true},
		"managed=false":     {so: scaledObject("s", managed("m", llmdv1alpha1.AnnotationManaged, "false"), "name", "d"), notManaged: true},
		"managed=TRUE opts in": {so: scaledObject("s", managed("m", llmdv1alpha1.AnnotationManaged, "TRUE"), "name", "d"),
			target: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: "d"}, min: 0, max: 100, cost: llmdv1alpha1.DefaultVariantCost},
		"wva's own ScaledObject": {so: func() *unstructured.Unstructured {
			u := scaledObject("s", managed("m"), "name", "d")
			u.SetLabels(map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA})
			return u
		}(), notManaged: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			va, err := FromScaledObject(c.so)
			switch {
			case c.notManaged:
				require.ErrorIs(t, err, ErrNotManaged)
				return
			case c.errContain != "":
				require.ErrorContains(t, err, c.errContain)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "s", va.Name)
			assert.Equal(t, "prod", va.Namespace)
			assert.Equal(t, types.UID("uid-s"), va.UID)
			assert.Equal(t, c.target, va.Spec.ScaleTargetRef)
			assert.Equal(t, c.min, *va.Spec.MinReplicas)
			assert.Equal(t, c.max, va.Spec.MaxReplicas)
			assert.Equal(t, c.cost, va.Spec.VariantCost)
			ref, ok := SourceOf(va)
			require.True(t, ok)
			assert.Equal(t, corev1.ObjectReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Namespace: "prod", Name: "s", UID: "uid-s"}, *ref)
		})
	}
}

func deploymentVA(name, target string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m", ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: target}}}
}

func TestVariants(t *testing.T) {
	cases := map[string]struct {
		vas      []*llmdv1alpha1.VariantAutoscaling
		hpas     []*autoscalingv2.HorizontalPodAutoscaler
		sos      []*unstructured.Unstructured
		variants []string
		targets  []string          // when set, the variants' target names
		problems map[string]string // object name -> reason
	}{
		"opted-in HPAs only": {hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("a", "da", managed("m")), hpa("b", "db", nil)},
			variants: []string{"a"}},
		"VA for the same target wins": {vas: []*llmdv1alpha1.VariantAutoscaling{deploymentVA("va", "d")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m")), hpa("other", "d2", managed("m"))},
			variants: []string{"other"}, problems: map[string]string{"h": llmdv1alpha1.ReasonConflictingVariantAutoscaling}},
		"VA of the same name wins": {vas: []*llmdv1alpha1.VariantAutoscaling{deploymentVA("h", "elsewhere")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))},
			problems: map[string]string{"h": llmdv1alpha1.ReasonConflictingVariantAutoscaling}},
		"VA in another namespace does not conflict": {
			vas:      []*llmdv1alpha1.VariantAutoscaling{func() *llmdv1alpha1.VariantAutoscaling { v := deploymentVA("h", "d"); v.Namespace = "dev"; return v }()},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))},
			variants: []string{"h"}},
		"bad annotations": {hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed(""))},
			problems: map[string]string{"h": llmdv1alpha1.ReasonInvalidAnnotations}},
		"opted-in ScaledObjects beside HPAs": {hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "dh", managed("m"))},
			sos: []*unstructured.Unstructured{scaledObject("s", managed("m"), "name", "ds"), scaledObject("plain", nil, "name", "dp")}, variants: []string{"h", "s"}},
		"VA for the ScaledObject's target wins (kind defaults to Deployment)": {vas: []*llmdv1alpha1.VariantAutoscaling{deploymentVA("va", "d")},
			sos:      []*unstructured.Unstructured{scaledObject("s", managed("m"), "name", "d")},
			problems: map[string]string{"s": llmdv1alpha1.ReasonConflictingVariantAutoscaling}},
		"an HPA and a ScaledObject on one target: the HPA wins": {
			sos:      []*unstructured.Unstructured{scaledObject("s", managed("m"), "name", "d")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))},
			variants: []string{"h"}, problems: map[string]string{"s": llmdv1alpha1.ReasonConflictingOptIn}},
		"an HPA and a ScaledObject of one name: the HPA wins": {
			sos:      []*unstructured.Unstructured{scaledObject("x", managed("m"), "name", "ds")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("x", "dh", managed("m"))},
			variants: []string{"x"}, targets: []string{"dh"}, problems: map[string]string{"x": llmdv1alpha1.ReasonConflictingOptIn}},
		"ScaledObject without a target": {sos: []*unstructured.Unstructured{scaledObject("s", managed("m"))},
			problems: map[string]string{"s": llmdv1alpha1.ReasonInvalidAnnotations}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var sources []OptInSource
			for _, h := range c.hpas {
				sources = append(sources, HPASource(h))
			}
			for _, so := range c.sos {
				sources = append(sources, ScaledObjectSource(so))
			}
			vas, problems := OptInVariants(c.vas, sources)
			var names, targets []string
			for _, va := range vas {
				names = append(names, va.Name)
				targets = append(targets, va.Spec.ScaleTargetRef.Name)
			}
			assert.Equal(t, c.variants, names)
			if c.targets != nil {
				assert.Equal(t, c.targets, targets)
			}
			got := map[string]string{}
			for _, p := range problems {
				got[p.Source.Ref.Name] = p.Reason
			}
			if c.problems == nil {
				c.problems = map[string]string{}
			}
			assert.Equal(t, c.problems, got)
		})
	}
}

// A conflict is reported once while it lasts, and again after it went
// away and came back.
func TestWarnerOncePerConflict(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	w := &Warner{Recorder: rec, Left: NewLeftGauge(prometheus.NewRegistry())}
	assert.Zero(t, testutil.ToFloat64(w.Left.WithLabelValues(llmdv1alpha1.ReasonConflictingVariantAutoscaling)))
	vas := []*llmdv1alpha1.VariantAutoscaling{deploymentVA("va", "d")}
	hpas := []OptInSource{HPASource(hpa("h", "d", managed("m")))}
	for range 3 {
		_, p := OptInVariants(vas, hpas)
		w.Report(p)
	}
	require.Len(t, rec.Events, 1)
	assert.Equal(t, 1.0, testutil.ToFloat64(w.Left.WithLabelValues(llmdv1alpha1.ReasonConflictingVariantAutoscaling)), "the HPA left out is counted")
	assert.Contains(t, <-rec.Events, "Warning ConflictingVariantAutoscaling VariantAutoscaling va also scales Deployment d and takes precedence; wva does not serve variant_name=h for this HorizontalPodAutoscaler")
	_, p := OptInVariants(nil, hpas)
	w.Report(p)
	assert.Zero(t, testutil.ToFloat64(w.Left.WithLabelValues(llmdv1alpha1.ReasonConflictingVariantAutoscaling)), "served again")
	_, p = OptInVariants(vas, hpas)
	w.Report(p)
	assert.Len(t, rec.Events, 1, "reported again after the conflict ended and came back")
}

func TestMemoryServesThroughLister(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, idx.Add(deploymentVA("real", "r")))
	m := &Memory{}
	l := Lister(llmdlisters.NewVariantAutoscalingLister(idx), m)
	ctx := context.Background()

	va, err := FromHPA(hpa("h", "d", managed("m")))
	require.NoError(t, err)
	m.Sync([]*llmdv1alpha1.VariantAutoscaling{va})
	got, err := l.VariantAutoscalings("prod").Get("h")
	require.NoError(t, err)
	assert.True(t, got.Status.DesiredOptimizedAlloc.LastRunTime.IsZero(), "no decision before the engine writes one")

	// The status writer keeps HPA-sourced status in memory and never calls
	// the API writer (nil here: a call would panic).
	w := StatusWriter{Memory: m}
	st := llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: 4, LastRunTime: metav1.Now()}}
	require.NoError(t, w.WriteStatus(ctx, va, st))
	got, err = l.VariantAutoscalings("prod").Get("h")
	require.NoError(t, err)
	assert.Equal(t, int32(4), got.Status.DesiredOptimizedAlloc.NumReplicas)

	all, err := l.List(labels.Everything())
	require.NoError(t, err)
	assert.Len(t, all, 2)

	// The next pass keeps the status for the same HPA (by UID)...
	again, _ := FromHPA(hpa("h", "d", managed("m")))
	m.Sync([]*llmdv1alpha1.VariantAutoscaling{again})
	assert.Equal(t, int32(4), again.Status.DesiredOptimizedAlloc.NumReplicas)
	// ...and an HPA no longer opted in is no longer served.
	m.Sync(nil)
	_, err = l.VariantAutoscalings("prod").Get("h")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	_, err = l.VariantAutoscalings("prod").Get("real")
	assert.NoError(t, err)
}

// recordObject keeps the object of the last Event.
type recordObject struct {
	record.EventRecorder
	last *runtime.Object
}

func (r recordObject) Event(obj runtime.Object, _, _, _ string) { *r.last = obj }

// Events about an opted-in variant name its HPA or ScaledObject; others
// are untouched.
func TestRecorderRedirectsToSource(t *testing.T) {
	var got runtime.Object
	r := Recorder{EventRecorder: recordObject{last: &got}}
	va, err := FromHPA(hpa("h", "d", managed("m")))
	require.NoError(t, err)
	r.Event(va, "Normal", "R", "m")
	assert.Equal(t, &corev1.ObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Namespace: "prod", Name: "h", UID: "uid-h"}, got)
	va, err = FromScaledObject(scaledObject("s", managed("m"), "name", "d"))
	require.NoError(t, err)
	r.Event(va, "Normal", "R", "m")
	assert.Equal(t, &corev1.ObjectReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Namespace: "prod", Name: "s", UID: "uid-s"}, got)
	real := deploymentVA("real", "r")
	r.Event(real, "Normal", "R", "m")
	assert.Same(t, real, got)
}

// Changed fires when variants come or go and when a decision changes, not
// when the engine rewrites the same decision: the KEDA scaler's streams
// learn opted-in variants' 0 <-> 1 decisions without waiting to re-send.
func TestMemoryChanged(t *testing.T) {
	calls := 0
	m := &Memory{Changed: func() { calls++ }}
	va, err := FromScaledObject(scaledObject("s", managed("m"), "name", "d"))
	require.NoError(t, err)
	decide := func(n int32) {
		m.WriteStatus(va, llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{NumReplicas: n, LastRunTime: metav1.Now()}})
	}
	steps := []struct {
		what string
		do   func()
		want int
	}{
		{"variant appears", func() { m.Sync([]*llmdv1alpha1.VariantAutoscaling{va.DeepCopy()}) }, 1},
		{"same variant again", func() { m.Sync([]*llmdv1alpha1.VariantAutoscaling{va.DeepCopy()}) }, 1},
		{"first decision 0", func() { decide(0) }, 2},
		{"same decision", func() { decide(0) }, 2},
		{"decision 1", func() { decide(1) }, 3},
		{"variant goes", func() { m.Sync(nil) }, 4},
		{"decision for a variant gone", func() { decide(2) }, 4},
	}
	for _, s := range steps {
		s.do()
		assert.Equal(t, s.want, calls, s.what)
	}
}
