package hpavariant

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		"no annotations": {hpa: hpa("h", "d", nil), notManaged: true},
		"managed=false":  {hpa: hpa("h", "d", managed("m", llmdv1alpha1.AnnotationManaged, "false")), notManaged: true},
		"model-id alone": {hpa: hpa("h", "d", map[string]string{llmdv1alpha1.AnnotationModelID: "m"}), notManaged: true},
		"wva's own HPA": {hpa: hpa("h", "d", managed("m"), func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Labels = map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA}
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
			assert.True(t, IsFromHPA(va))
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

func vaFor(name, target string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m", ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: target}}}
}

func TestVariants(t *testing.T) {
	cases := map[string]struct {
		vas      []*llmdv1alpha1.VariantAutoscaling
		hpas     []*autoscalingv2.HorizontalPodAutoscaler
		variants []string
		problems map[string]string // HPA name -> reason
	}{
		"opted-in HPAs only": {hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("a", "da", managed("m")), hpa("b", "db", nil)},
			variants: []string{"a"}},
		"VA for the same target wins": {vas: []*llmdv1alpha1.VariantAutoscaling{vaFor("va", "d")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m")), hpa("other", "d2", managed("m"))},
			variants: []string{"other"}, problems: map[string]string{"h": llmdv1alpha1.ReasonConflictingVariantAutoscaling}},
		"VA of the same name wins": {vas: []*llmdv1alpha1.VariantAutoscaling{vaFor("h", "elsewhere")},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))},
			problems: map[string]string{"h": llmdv1alpha1.ReasonConflictingVariantAutoscaling}},
		"VA in another namespace does not conflict": {
			vas:      []*llmdv1alpha1.VariantAutoscaling{func() *llmdv1alpha1.VariantAutoscaling { v := vaFor("h", "d"); v.Namespace = "dev"; return v }()},
			hpas:     []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))},
			variants: []string{"h"}},
		"bad annotations": {hpas: []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed(""))},
			problems: map[string]string{"h": llmdv1alpha1.ReasonInvalidAnnotations}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			vas, problems := Variants(c.vas, c.hpas)
			var names []string
			for _, va := range vas {
				names = append(names, va.Name)
			}
			assert.Equal(t, c.variants, names)
			got := map[string]string{}
			for _, p := range problems {
				got[p.HPA.Name] = p.Reason
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
	w := &Warner{Recorder: rec}
	vas := []*llmdv1alpha1.VariantAutoscaling{vaFor("va", "d")}
	hpas := []*autoscalingv2.HorizontalPodAutoscaler{hpa("h", "d", managed("m"))}
	for range 3 {
		_, p := Variants(vas, hpas)
		w.Report(p)
	}
	require.Len(t, rec.Events, 1)
	assert.Contains(t, <-rec.Events, "Warning ConflictingVariantAutoscaling VariantAutoscaling va also scales Deployment d")
	_, p := Variants(nil, hpas)
	w.Report(p)
	_, p = Variants(vas, hpas)
	w.Report(p)
	assert.Len(t, rec.Events, 1, "reported again after the conflict ended and came back")
}

func TestMemoryServesThroughLister(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, idx.Add(vaFor("real", "r")))
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

// Events about an HPA-sourced variant name the HPA; others are untouched.
func TestRecorderRedirectsToHPA(t *testing.T) {
	var got runtime.Object
	r := Recorder{EventRecorder: recordObject{last: &got}}
	va, err := FromHPA(hpa("h", "d", managed("m")))
	require.NoError(t, err)
	r.Event(va, "Normal", "R", "m")
	assert.Equal(t, &corev1.ObjectReference{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Namespace: "prod", Name: "h", UID: "uid-h"}, got)
	real := vaFor("real", "r")
	r.Event(real, "Normal", "R", "m")
	assert.Same(t, real, got)
}
