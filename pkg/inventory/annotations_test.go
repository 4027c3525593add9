package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// The optional upstream annotations, each valid, invalid and absent, on an
// HPA and on a ScaledObject: a valid value reaches the built VA, an invalid
// one rejects the object whole (reported as InvalidAnnotations), an absent
// one leaves the field unset.
func TestOptionalAnnotations(t *testing.T) {
	type want struct {
		gpus      *int32
		retention *time.Duration
		role      string // "" when the VA carries no role
		errAbout  string // the annotation an error names
	}
	dur := func(d time.Duration) *time.Duration { return &d }
	cases := map[string]struct {
		key, value string // key "" sets no annotation
		want       want
	}{
		"gpus-per-replica absent":       {want: want{}},
		"gpus-per-replica 4":            {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "4", want: want{gpus: ptr.To[int32](4)}},
		"gpus-per-replica 0 is unknown": {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "0", want: want{gpus: ptr.To[int32](0)}},
		"gpus-per-replica at the bound": {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "1024", want: want{gpus: ptr.To[int32](1024)}},
		"gpus-per-replica spaces":       {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: " 8 ", want: want{gpus: ptr.To[int32](8)}},
		"gpus-per-replica blank":        {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: " ", want: want{}},
		"gpus-per-replica negative":     {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "-1", want: want{errAbout: llmdv1alpha1.AnnotationGPUsPerReplica}},
		"gpus-per-replica fraction":     {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "1.5", want: want{errAbout: llmdv1alpha1.AnnotationGPUsPerReplica}},
		"gpus-per-replica a word":       {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "two", want: want{errAbout: llmdv1alpha1.AnnotationGPUsPerReplica}},
		"gpus-per-replica above":        {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "1025", want: want{errAbout: llmdv1alpha1.AnnotationGPUsPerReplica}},
		"gpus-per-replica overflow":     {key: llmdv1alpha1.AnnotationGPUsPerReplica, value: "4294967300", want: want{errAbout: llmdv1alpha1.AnnotationGPUsPerReplica}},

		"retention absent":      {want: want{}},
		"retention 30m":         {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "30m", want: want{retention: dur(30 * time.Minute)}},
		"retention 1h30m":       {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "1h30m", want: want{retention: dur(90 * time.Minute)}},
		"retention at the min":  {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "1m", want: want{retention: dur(time.Minute)}},
		"retention at the max":  {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "168h", want: want{retention: dur(7 * 24 * time.Hour)}},
		"retention below":       {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "30s", want: want{errAbout: llmdv1alpha1.AnnotationScaleToZeroRetention}},
		"retention above":       {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "169h", want: want{errAbout: llmdv1alpha1.AnnotationScaleToZeroRetention}},
		"retention no unit":     {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "600", want: want{errAbout: llmdv1alpha1.AnnotationScaleToZeroRetention}},
		"retention in days":     {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "1d", want: want{errAbout: llmdv1alpha1.AnnotationScaleToZeroRetention}},
		"retention negative":    {key: llmdv1alpha1.AnnotationScaleToZeroRetention, value: "-10m", want: want{errAbout: llmdv1alpha1.AnnotationScaleToZeroRetention}},
		"role absent":           {want: want{}},
		"role prefill":          {key: llmdv1alpha1.AnnotationRole, value: "prefill", want: want{role: "prefill"}},
		"role Decode, any case": {key: llmdv1alpha1.AnnotationRole, value: " Decode", want: want{role: "decode"}},
		"role both":             {key: llmdv1alpha1.AnnotationRole, value: "both", want: want{role: "both"}},
		"role misspelt":         {key: llmdv1alpha1.AnnotationRole, value: "prefil", want: want{errAbout: llmdv1alpha1.AnnotationRole}},
	}
	for name, c := range cases {
		annotations := func() map[string]string {
			a := managed("m", llmdv1alpha1.AnnotationVariantCost, "3")
			if c.key != "" {
				a[c.key] = c.value
			}
			return a
		}
		for kind, build := range map[string]func() (*llmdv1alpha1.VariantAutoscaling, error){
			"HPA": func() (*llmdv1alpha1.VariantAutoscaling, error) { return FromHPA(hpa("h", "d", annotations())) },
			"ScaledObject": func() (*llmdv1alpha1.VariantAutoscaling, error) {
				return FromScaledObject(scaledObject("h", annotations(), "name", "d"))
			},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				va, err := build()
				if c.want.errAbout != "" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), c.want.errAbout)
					assert.Contains(t, err.Error(), c.value)
					assert.Nil(t, va, "a bad annotation rejects the object whole")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, "3", va.Spec.VariantCost, "the other annotations still apply")
				assert.Equal(t, c.want.gpus, va.Spec.GPUsPerReplica)
				if c.want.retention == nil {
					assert.Nil(t, va.Spec.ScaleToZeroRetention)
				} else {
					require.NotNil(t, va.Spec.ScaleToZeroRetention)
					assert.Equal(t, *c.want.retention, va.Spec.ScaleToZeroRetention.Duration)
					d, ok := va.RetentionOverride()
					assert.True(t, ok)
					assert.Equal(t, *c.want.retention, d)
				}
				role, ok := RoleOverride(va)
				assert.Equal(t, c.want.role != "", ok)
				assert.Equal(t, decision.Role(c.want.role), role)
			})
		}
	}
}

// A bad optional annotation is reported like a bad variant-cost: the
// object is left out with InvalidAnnotations, the others are served.
func TestOptionalAnnotationProblems(t *testing.T) {
	sources := []OptInSource{
		HPASource(hpa("gpus", "d1", managed("m", llmdv1alpha1.AnnotationGPUsPerReplica, "many"))),
		HPASource(hpa("retention", "d2", managed("m", llmdv1alpha1.AnnotationScaleToZeroRetention, "10"))),
		ScaledObjectSource(scaledObject("role", managed("m", llmdv1alpha1.AnnotationRole, "router"), "name", "d3")),
		HPASource(hpa("good", "d4", managed("m", llmdv1alpha1.AnnotationGPUsPerReplica, "2", llmdv1alpha1.AnnotationScaleToZeroRetention, "20m",
			llmdv1alpha1.AnnotationRole, "decode"))),
	}
	vas, problems := OptInVariants(nil, sources)
	require.Len(t, vas, 1)
	assert.Equal(t, "good", vas[0].Name)
	assert.Equal(t, int32(2), *vas[0].Spec.GPUsPerReplica)
	got := map[string]string{}
	for _, p := range problems {
		got[p.Source.Ref.Name] = p.Reason
	}
	assert.Equal(t, map[string]string{"gpus": llmdv1alpha1.ReasonInvalidAnnotations, "retention": llmdv1alpha1.ReasonInvalidAnnotations,
		"role": llmdv1alpha1.ReasonInvalidAnnotations}, got)
}

// The llm-d.ai/role annotation of an opted-in object decides its variant's
// role over the pod template's label; without it the label decides, and a
// VA's annotation of that name is not read (a VA's role is its pods').
func TestResolveRoleAnnotation(t *testing.T) {
	deploy := func(name, label string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		d.Spec.Template.Labels = map[string]string{"app": name}
		if label != "" {
			d.Spec.Template.Labels[llmdv1alpha1.LabelRole] = label
		}
		return d
	}
	va := vaFor("z-va", "Deployment", "va-target")
	va.Annotations = map[string]string{llmdv1alpha1.AnnotationRole: "prefill"}
	inv := &Inventory{
		VAs: llmdlisters.NewVariantAutoscalingLister(indexer(t, va)),
		Deployments: appslisters.NewDeploymentLister(indexer(t, deploy("decode-pods", "decode"), deploy("plain-pods", ""),
			deploy("prefill-pods", "prefill"), deploy("va-target", "decode"))),
		StatefulSets: appslisters.NewStatefulSetLister(indexer(t)),
		Pods:         corelisters.NewPodLister(indexer(t)),
		HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(indexer(t,
			hpa("a-overrides-label", "decode-pods", managed("m", llmdv1alpha1.AnnotationRole, "prefill")),
			hpa("b-annotation-only", "plain-pods", managed("m", llmdv1alpha1.AnnotationRole, "decode")),
			hpa("c-label-only", "prefill-pods", managed("m")))),
		ScaledObjects: cache.NewGenericLister(indexer(t), llmdv1alpha1.ScaledObjectResource.GroupResource()),
	}
	views, err := inv.Views()
	require.NoError(t, err)
	got := map[string]decision.Role{}
	for _, v := range views {
		require.True(t, v.Target.Resolved, "%s: %+v", v.VA.Name, v.Target)
		got[v.VA.Name] = v.Target.Role
	}
	assert.Equal(t, map[string]decision.Role{"a-overrides-label": decision.RolePrefill, "b-annotation-only": decision.RoleDecode,
		"c-label-only": decision.RolePrefill, "z-va": decision.RoleDecode}, got)
}
