package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func testVA(min int32, max int32, annotations map[string]string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llama-l4", UID: "uid-1", Annotations: annotations},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: "llama-l4-deploy"},
			ModelID:        "m", MinReplicas: ptr.To(min), MaxReplicas: max,
		},
	}
}

func TestDesiredHPA(t *testing.T) {
	full := Capabilities{Tolerance: true, ScaleToZero: true}
	cases := []struct {
		name     string
		va       *llmdv1alpha1.VariantAutoscaling
		caps     Capabilities
		min      int32
		tol      bool
		errText  string
		downStab int32
	}{
		{name: "min 0 kept where the HPA can scale to zero", va: testVA(0, 8, nil), caps: full, min: 0, tol: true, downStab: 30},
		{name: "min 0 raised to 1 without HPAScaleToZero", va: testVA(0, 8, nil), caps: Capabilities{Tolerance: true}, min: 1, tol: true, downStab: 30},
		{name: "no tolerance field on older clusters", va: testVA(2, 8, nil), caps: Capabilities{}, min: 2, tol: false, downStab: 30},
		{name: "behavior annotation overrides scale-down", va: testVA(1, 8, map[string]string{llmdv1alpha1.AnnotationHPABehavior: "scaleDown:\n  stabilizationWindowSeconds: 0"}),
			caps: full, min: 1, tol: true, downStab: 0},
		{name: "invalid annotation falls back with an error", va: testVA(1, 8, map[string]string{llmdv1alpha1.AnnotationHPABehavior: "scaleDown: {stabilisation: 1}"}),
			caps: full, min: 1, tol: true, downStab: 30, errText: "annotation wva.llmd.ai/hpa-behavior"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hpa, err := DesiredHPA(tc.va, tc.caps)
			if tc.errText != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errText)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, "llama-l4", hpa.Name)
			assert.Equal(t, tc.min, *hpa.Spec.MinReplicas)
			assert.Equal(t, int32(8), hpa.Spec.MaxReplicas)
			assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4-deploy"}, hpa.Spec.ScaleTargetRef)
			require.Len(t, hpa.Spec.Metrics, 1)
			ext := hpa.Spec.Metrics[0].External
			assert.Equal(t, "wva_desired_replicas", ext.Metric.Name)
			assert.Equal(t, map[string]string{"variant_name": "llama-l4"}, ext.Metric.Selector.MatchLabels)
			assert.Equal(t, autoscalingv2.AverageValueMetricType, ext.Target.Type)
			assert.Equal(t, int64(1), ext.Target.AverageValue.Value())
			assert.Equal(t, tc.tol, hpa.Spec.Behavior.ScaleUp.Tolerance != nil)
			assert.Equal(t, tc.tol, hpa.Spec.Behavior.ScaleDown.Tolerance != nil)
			if tc.tol {
				assert.True(t, hpa.Spec.Behavior.ScaleUp.Tolerance.IsZero())
			}
			assert.Equal(t, int32(0), *hpa.Spec.Behavior.ScaleUp.StabilizationWindowSeconds)
			assert.Equal(t, tc.downStab, *hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds)
			require.Len(t, hpa.OwnerReferences, 1)
			assert.Equal(t, "VariantAutoscaling", hpa.OwnerReferences[0].Kind)
			assert.True(t, *hpa.OwnerReferences[0].Controller)
			assert.Equal(t, "wva", hpa.Labels[llmdv1alpha1.LabelManagedBy])
		})
	}
}

func TestInSyncAndApply(t *testing.T) {
	va := testVA(1, 8, nil)
	desired, err := DesiredHPA(va, Capabilities{Tolerance: true, ScaleToZero: true})
	require.NoError(t, err)

	// What the API server returns: defaults filled in, quantities
	// re-serialised, extra labels from someone else, a status.
	live := desired.DeepCopy()
	live.Labels["team"] = "inference"
	live.Spec.Metrics[0].External.Target.AverageValue = ptr.To(resource.MustParse("1000m"))
	live.Status.CurrentReplicas = 3
	assert.True(t, InSync(live, desired), "semantic equality: 1000m == 1, extra labels allowed")

	edited := live.DeepCopy()
	edited.Spec.MaxReplicas = 99
	assert.False(t, InSync(edited, desired), "hand-edited max is drift")
	fixed := Apply(edited, desired)
	assert.True(t, InSync(fixed, desired))
	assert.Equal(t, "inference", fixed.Labels["team"], "foreign labels kept")
	assert.Equal(t, int32(3), fixed.Status.CurrentReplicas, "status kept")

	foreign := live.DeepCopy()
	foreign.OwnerReferences = nil
	assert.False(t, InSync(foreign, desired), "not owned is not in sync")
}

// TestInSyncBehaviorForms: for every form the behavior annotation can
// take, the HPA the API server returns (its behavior defaults filled in,
// written out here as upstream's SetDefaults_HorizontalPodAutoscalerBehavior
// fills them) is in sync with the desired one, and a real change to a
// defaulted field is still drift.
func TestInSyncBehaviorForms(t *testing.T) {
	zero := resource.MustParse("0")
	rules := func(window *int32, sel autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: window, SelectPolicy: &sel, Policies: policies, Tolerance: &zero}
	}
	pods := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: v, PeriodSeconds: period}
	}
	percent := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: v, PeriodSeconds: period}
	}
	maxSel, minSel := autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect
	// wva's defaults (DefaultBehavior) and upstream's (the API server's).
	wvaUp := rules(ptr.To[int32](0), maxSel, pods(100, 15), percent(100, 15))
	wvaDown := rules(ptr.To[int32](30), maxSel, percent(100, 15))
	serverUp := func(window int32) *autoscalingv2.HPAScalingRules {
		return rules(ptr.To(window), maxSel, pods(4, 15), percent(100, 15))
	}
	cases := []struct {
		name       string
		annotation string // "" for none
		up, down   *autoscalingv2.HPAScalingRules
	}{
		{name: "none", up: wvaUp, down: wvaDown},
		{name: "scaleUp only, window only", annotation: "scaleUp:\n  stabilizationWindowSeconds: 10",
			up: serverUp(10), down: wvaDown},
		{name: "scaleDown only, policies only", annotation: "scaleDown:\n  policies: [{type: Pods, value: 1, periodSeconds: 60}]",
			up: wvaUp, down: rules(nil, maxSel, pods(1, 60))},
		{name: "partial policies", annotation: "scaleUp:\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\nscaleDown:\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]",
			up: rules(ptr.To[int32](0), maxSel, pods(2, 15)), down: rules(nil, maxSel, percent(50, 30))},
		{name: "selectPolicy omitted",
			annotation: "scaleUp:\n  stabilizationWindowSeconds: 5\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\n" +
				"scaleDown:\n  stabilizationWindowSeconds: 60\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]",
			up: rules(ptr.To[int32](5), maxSel, pods(2, 15)), down: rules(ptr.To[int32](60), maxSel, percent(50, 30))},
		{name: "empty rules", annotation: "scaleUp: {}\nscaleDown: {}",
			up: serverUp(0), down: rules(nil, maxSel, percent(100, 15))},
		{name: "full",
			annotation: "scaleUp:\n  stabilizationWindowSeconds: 0\n  selectPolicy: Min\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\n" +
				"scaleDown:\n  stabilizationWindowSeconds: 60\n  selectPolicy: Max\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]",
			up: rules(ptr.To[int32](0), minSel, pods(2, 15)), down: rules(ptr.To[int32](60), maxSel, percent(50, 30))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var annotations map[string]string
			if tc.annotation != "" {
				annotations = map[string]string{llmdv1alpha1.AnnotationHPABehavior: tc.annotation}
			}
			desired, err := DesiredHPA(testVA(1, 8, annotations), Capabilities{Tolerance: true, ScaleToZero: true})
			require.NoError(t, err)
			before := desired.DeepCopy()

			stored := desired.DeepCopy()
			stored.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: tc.up, ScaleDown: tc.down}
			assert.True(t, InSync(stored, desired), "the API server's defaulted form is in sync")
			assert.Equal(t, before, desired, "InSync leaves desired as it is")

			drift := stored.DeepCopy()
			drift.Spec.Behavior.ScaleUp.SelectPolicy = ptr.To(autoscalingv2.DisabledPolicySelect)
			assert.False(t, InSync(drift, desired), "scale-up disabled by hand is drift")
			drift = stored.DeepCopy()
			drift.Spec.Behavior.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{pods(9, 9)}
			assert.False(t, InSync(drift, desired), "other scale-down policies are drift")
			drift = stored.DeepCopy()
			drift.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = ptr.To[int32](600)
			assert.False(t, InSync(drift, desired), "another scale-down window is drift")
		})
	}
}

func decided(va *llmdv1alpha1.VariantAutoscaling, replicas int32, age time.Duration, conds ...metav1.Condition) *llmdv1alpha1.VariantAutoscaling {
	va = va.DeepCopy()
	va.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: replicas, Reason: "test", LastRunTime: metav1.NewTime(now.Add(-age))}
	va.Status.Conditions = conds
	return va
}

// woken sets the fast path's wake annotation; a zero at is an unreadable value.
func woken(va *llmdv1alpha1.VariantAutoscaling, at time.Time) *llmdv1alpha1.VariantAutoscaling {
	v := "not a time"
	if !at.IsZero() {
		v = at.UTC().Format(time.RFC3339Nano)
	}
	va = va.DeepCopy()
	if va.Annotations == nil {
		va.Annotations = map[string]string{}
	}
	va.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt] = v
	return va
}

func TestPlanDirectScale(t *testing.T) {
	noGates := Capabilities{}
	full := Capabilities{Tolerance: true, ScaleToZero: true}
	unreachable := metav1.Condition{Type: llmdv1alpha1.ConditionTypeMetricsAvailable, Status: metav1.ConditionFalse, Reason: llmdv1alpha1.ReasonPrometheusError}
	cases := []struct {
		name    string
		va      *llmdv1alpha1.VariantAutoscaling
		caps    Capabilities
		current int32
		want    int32
		act     bool
	}{
		{"no decision yet", testVA(0, 8, nil), noGates, 3, 0, false},
		{"stale decision is never acted on", decided(testVA(0, 8, nil), 0, time.Hour), noGates, 3, 0, false},
		{"decision 0 without HPAScaleToZero: controller scales to 0", decided(testVA(0, 8, nil), 0, time.Second), noGates, 3, 0, true},
		{"decision 0 with HPAScaleToZero: the HPA does it", decided(testVA(0, 8, nil), 0, time.Second), full, 3, 0, false},
		{"decision 0 but min 1: nothing", decided(testVA(1, 8, nil), 0, time.Second), noGates, 3, 0, false},
		{"never to 0 on a decision older than the last wake", woken(decided(testVA(0, 8, nil), 0, 10*time.Second), now.Add(-time.Second)), noGates, 1, 0, false},
		{"never to 0 on a decision in the wake's second", woken(decided(testVA(0, 8, nil), 0, 0), now.Add(300*time.Millisecond)), noGates, 1, 0, false},
		{"to 0 on a decision after the last wake", woken(decided(testVA(0, 8, nil), 0, time.Second), now.Add(-time.Hour)), noGates, 1, 0, true},
		{"unreadable wake time: decided as without one", woken(decided(testVA(0, 8, nil), 0, time.Second), time.Time{}), noGates, 1, 0, true},
		{"never to 0 while Prometheus is unreachable", decided(testVA(0, 8, nil), 0, time.Second, unreachable), noGates, 3, 0, false},
		{"from 0: the HPA is disabled, the controller scales up", decided(testVA(0, 8, nil), 2, time.Second), noGates, 0, 2, true},
		{"from 0 also with the gate (target zeroed by someone else)", decided(testVA(0, 8, nil), 1, time.Second), full, 0, 1, true},
		{"20 -> 21 in the tolerance band without configurable tolerance", decided(testVA(1, 30, nil), 21, time.Second), noGates, 20, 21, true},
		{"21 -> 20 in the tolerance band without configurable tolerance", decided(testVA(1, 30, nil), 20, time.Second), noGates, 21, 20, true},
		{"20 -> 21 with tolerance 0: the HPA does it", decided(testVA(1, 30, nil), 21, time.Second), full, 20, 0, false},
		{"out of band: the HPA does it", decided(testVA(1, 30, nil), 5, time.Second), noGates, 2, 0, false},
		{"equal: nothing", decided(testVA(1, 30, nil), 4, time.Second), noGates, 4, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, act := PlanDirectScale(tc.va, tc.caps, tc.current, now, 5*time.Minute)
			assert.Equal(t, tc.act, act)
			if act {
				assert.Equal(t, tc.want, plan.Replicas)
				assert.NotEmpty(t, plan.Reason)
			}
		})
	}
}

// TestPlanDirectScaleClampsToCurrentBounds: a decision made before the
// VA's bounds changed (or re-applied after a write conflict) is clamped to
// the bounds as they are at actuation.
func TestPlanDirectScaleClampsToCurrentBounds(t *testing.T) {
	noGates := Capabilities{}
	cases := []struct {
		name    string
		va      *llmdv1alpha1.VariantAutoscaling
		current int32
		want    int32
		act     bool
	}{
		{"from 0: decision 5, maxReplicas lowered to 2", decided(testVA(0, 2, nil), 5, time.Second), 0, 2, true},
		{"from 0: decision 1, minReplicas raised to 3", decided(testVA(3, 8, nil), 1, time.Second), 0, 3, true},
		{"band: 20 -> 21, maxReplicas lowered to 20: nothing", decided(testVA(1, 20, nil), 21, time.Second), 20, 0, false},
		{"band: 21 -> 20, minReplicas raised to 21: nothing", decided(testVA(21, 30, nil), 20, time.Second), 21, 0, false},
		{"band: 20 -> 21, maxReplicas lowered to 10", decided(testVA(1, 10, nil), 21, time.Second), 20, 10, true},
		{"unset maxReplicas means its default", decided(testVA(0, 0, nil), 5, time.Second), 0, llmdv1alpha1.DefaultMaxReplicas, true},
		{"to 0 where minReplicas is 0 stays 0", decided(testVA(0, 2, nil), 0, time.Second), 3, 0, true},
		{"within bounds: as decided", decided(testVA(0, 8, nil), 3, time.Second), 0, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, output := range []Output{OutputHPA, OutputScaledObject} {
				plan, act := PlanDirectScaleFor(output, tc.va, noGates, tc.current, now, 5*time.Minute)
				if output == OutputScaledObject && (tc.current == 0 || tc.want == 0) {
					assert.False(t, act, "KEDA owns 0 <-> 1")
					continue
				}
				assert.Equal(t, tc.act, act, output)
				if act {
					assert.Equal(t, tc.want, plan.Replicas, output)
					assert.LessOrEqual(t, plan.Replicas, tc.va.MaxReplicasOrDefault())
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	o := NewOptions()
	require.NoError(t, o.Validate())
	o.HPATolerance = "maybe"
	o.Workers = 0
	err := o.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--hpa-tolerance="maybe": want auto, true or false`)
	assert.Contains(t, err.Error(), "--workers=0")
}
