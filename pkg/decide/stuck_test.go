package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/pkg/analyzer/saturation"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision/params"
)

func TestSetStuckCondition(t *testing.T) {
	h100 := saturation.Stuck{Variant: "h100", Since: t0.Add(-time.Hour), For: params.Duration(time.Hour), Bound: params.Duration(20 * time.Minute),
		Desired: 1, Current: 1, Pending: 1}
	stuckCond := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: llmdv1alpha1.ConditionTypeTransitionStuck, Status: status, Reason: llmdv1alpha1.ReasonStuckTransition,
			Message: h100.Message(), LastTransitionTime: metav1.NewTime(t0.Add(-10 * time.Minute))}}
	}
	cases := []struct {
		name       string
		had        []metav1.Condition
		analysis   any
		wantStatus metav1.ConditionStatus // "" = no condition
		wantReason string
		wantOnset  bool
	}{
		{name: "stuck now, not before: True and one onset", analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition, wantOnset: true},
		{name: "still stuck: True, no second onset", had: stuckCond(metav1.ConditionTrue), analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition},
		{name: "stuck again after recovering: a new onset", had: stuckCond(metav1.ConditionFalse), analysis: saturation.Analysis{Stuck: []saturation.Stuck{h100}},
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition, wantOnset: true},
		{name: "recovered: False", had: stuckCond(metav1.ConditionTrue), analysis: saturation.Analysis{},
			wantStatus: metav1.ConditionFalse, wantReason: llmdv1alpha1.ReasonNoStuckTransition},
		{name: "never stuck: no condition", analysis: saturation.Analysis{}},
		{name: "another variant stuck: not this one", analysis: saturation.Analysis{Stuck: []saturation.Stuck{{Variant: "l4"}}}},
		{name: "no analysis (metrics down): kept as it was", had: stuckCond(metav1.ConditionTrue),
			wantStatus: metav1.ConditionTrue, wantReason: llmdv1alpha1.ReasonStuckTransition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := va("prod", "h100", "llama", "40", 0, 4)
			v.Status.Conditions = tc.had
			st := *v.Status.DeepCopy()
			onset := SetStuckCondition(&st, v, GroupResult{Analysis: tc.analysis}, t0)
			c := meta.FindStatusCondition(st.Conditions, llmdv1alpha1.ConditionTypeTransitionStuck)
			if tc.wantStatus == "" {
				assert.Nil(t, c)
			} else {
				require.NotNil(t, c)
				assert.Equal(t, tc.wantStatus, c.Status)
				assert.Equal(t, tc.wantReason, c.Reason)
			}
			if tc.wantOnset {
				assert.Equal(t, h100.Message(), onset)
				assert.Equal(t, h100.Message(), c.Message)
			} else {
				assert.Empty(t, onset)
			}
		})
	}
}
