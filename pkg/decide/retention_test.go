package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// retentionVA is a scale-to-zero-able variant of model granite at one
// replica, decided 15 minutes ago, with spec.scaleToZeroRetention when
// retention > 0.
func retentionVA(name string, retention time.Duration) *llmdv1alpha1.VariantAutoscaling {
	v := va("dev", name, "granite", "5", 0, 4)
	if retention > 0 {
		v.Spec.ScaleToZeroRetention = &metav1.Duration{Duration: retention}
	}
	v.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 1, LastUpdate: metav1.NewTime(t0.Add(-15 * time.Minute))}
	return v
}

func TestGroupRetention(t *testing.T) {
	base := params.Duration(10 * time.Minute)
	view := func(retention time.Duration) View { return View{VA: retentionVA("v", retention)} }
	for _, tc := range []struct {
		name    string
		members []View
		want    time.Duration
	}{
		{"no override: the ConfigMap's", []View{view(0)}, 10 * time.Minute},
		{"a longer override", []View{view(30 * time.Minute)}, 30 * time.Minute},
		{"a shorter override on every variant", []View{view(2 * time.Minute), view(5 * time.Minute)}, 5 * time.Minute},
		{"a shorter override beside a variant without one", []View{view(2 * time.Minute), view(0)}, 10 * time.Minute},
		{"the longest of overrides and the ConfigMap's", []View{view(0), view(time.Hour), view(2 * time.Minute)}, time.Hour},
		{"an override the CRD rejects is ignored", []View{view(10 * time.Second)}, 10 * time.Minute},
		{"no members", nil, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, params.Duration(tc.want), GroupRetention(base, tc.members))
		})
	}
}

// The enforcer sends a group to zero only after no request for its
// variants' retention (spec.scaleToZeroRetention over the ConfigMap's 10m),
// and the request count it reads is the one over that retention.
func TestVariantRetentionDecidesZero(t *testing.T) {
	requests := func(counts map[time.Duration]float64) map[time.Duration]map[collector.ModelKey]float64 {
		out := map[time.Duration]map[collector.ModelKey]float64{}
		for w, n := range counts {
			out[w] = map[collector.ModelKey]float64{{Namespace: "dev", Model: "granite"}: n}
		}
		return out
	}
	// Idle for the last 2 and 10 minutes, 5 requests in the last 30.
	quietLately := requests(map[time.Duration]float64{2 * time.Minute: 0, 10 * time.Minute: 0, 30 * time.Minute: 5})
	// Idle for 2 minutes, requests in the last 10 and 30.
	quietBriefly := requests(map[time.Duration]float64{2 * time.Minute: 0, 10 * time.Minute: 3, 30 * time.Minute: 5})
	idle := requests(map[time.Duration]float64{2 * time.Minute: 0, 10 * time.Minute: 0, 30 * time.Minute: 0})
	cases := []struct {
		name      string
		vas       []*llmdv1alpha1.VariantAutoscaling
		requests  map[time.Duration]map[collector.ModelKey]float64
		retention time.Duration
		zero      bool
	}{
		{"ConfigMap's 10m, idle over it: zero", []*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 0)}, quietLately, 10 * time.Minute, true},
		{"30m override, requests within it: held", []*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 30*time.Minute)}, quietLately, 30 * time.Minute, false},
		{"30m override, idle over it: zero", []*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 30*time.Minute)}, idle, 30 * time.Minute, true},
		{"2m override, idle over it: zero before the ConfigMap's 10m", []*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 2*time.Minute)},
			quietBriefly, 2 * time.Minute, true},
		{"2m override beside a variant without one: the group waits 10m",
			[]*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 2*time.Minute), retentionVA("b", 0)}, quietBriefly, 10 * time.Minute, false},
		{"30m override on one of two: the group waits 30m",
			[]*llmdv1alpha1.VariantAutoscaling{retentionVA("a", 30*time.Minute), retentionVA("b", 0)}, quietLately, 30 * time.Minute, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var views []View
			metrics := collector.Result{Requests: tc.requests, Pods: map[collector.PodKey]collector.PodMetrics{}}
			for _, v := range tc.vas {
				views = append(views, View{VA: v, Target: resolved(1, v.Name+"-0")})
				for k, m := range collectedPods("dev", 0, v.Name+"-0") {
					metrics.Pods[k] = m
				}
			}
			plans := BuildPlans(views, metrics, nil, scaleToZeroOn)
			require.Len(t, plans, 1)
			in := plans[0].Input
			assert.Equal(t, tc.retention, in.Config.ScaleToZero.RetentionPeriod.D())
			require.Equal(t, MetricsAvailable, in.Metrics)
			targets := Enforce(in.EnforcerInput(t0))
			require.Len(t, targets, len(tc.vas))
			for _, tg := range targets {
				if tc.zero {
					assert.Equal(t, int32(0), tg.Replicas, "%+v", tg)
					assert.Equal(t, decision.RuleScaleToZero, tg.Rule)
					assert.Contains(t, tg.Reason, tc.retention.String())
				} else {
					assert.Equal(t, int32(1), tg.Replicas, "%+v", tg)
				}
			}
		})
	}
}

// Without metrics, the fallback's retention (no metrics for longer than
// it) is the variant's too: 15 minutes without metrics send a 10m group
// to zero, not a group whose variant asks for 30m.
func TestVariantRetentionFallback(t *testing.T) {
	for _, tc := range []struct {
		retention time.Duration
		want      int32
		rule      decision.Rule
	}{
		{0, 0, decision.RuleRetention},
		{30 * time.Minute, 1, decision.RuleLastResort},
	} {
		t.Run(tc.retention.String(), func(t *testing.T) {
			views := []View{{VA: retentionVA("a", tc.retention), Target: Target{Resolved: true, SpecReplicas: 1}}}
			plans := BuildPlans(views, collector.Result{Requests: map[time.Duration]map[collector.ModelKey]float64{}}, nil, scaleToZeroOn)
			require.Len(t, plans, 1)
			require.Equal(t, MetricsAbsent, plans[0].Input.Metrics)
			targets := Enforce(plans[0].Input.EnforcerInput(t0))
			require.Len(t, targets, 1)
			assert.Equal(t, tc.want, targets[0].Replicas, "%+v", targets[0])
			assert.Equal(t, tc.rule, targets[0].Rule)
		})
	}
}
