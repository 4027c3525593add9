package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/inferencepool"
)

type fakePools []inferencepool.Pool

func (f fakePools) Resolve(ns string, podLabels map[string]string) (inferencepool.Resolution, bool) {
	return inferencepool.Match(f, ns, podLabels), true
}

// Each variant's status names the InferencePool that selects its pods (by
// the scale target's pod template labels) and the pool's EPP; the condition
// is engine-owned, so ClientStatusWriter writes it.
func TestRunOnceInferencePoolCondition(t *testing.T) {
	withLabels := func(tg decide.Target, l map[string]string) decide.Target { tg.PodLabels = l; return tg }
	views := &fakeViews{views: []decide.View{
		{VA: va("prod", "l4", "llama", "5", 1, 5), Target: withLabels(resolved(1, "p1"), map[string]string{"app": "l4"})},
		{VA: va("prod", "q", "qwen", "5", 1, 5), Target: withLabels(resolved(1, "p2"), map[string]string{"app": "q"})},
	}}
	e := testEngine(views, clocktesting.NewFakeClock(t0))
	e.Pools = fakePools{
		{Namespace: "prod", Name: "llama", Selector: map[string]string{"app": "l4"}, EPP: inferencepool.EndpointPicker{Kind: "Service", Name: "llama-epp", Port: 9002}},
		{Namespace: "dev", Name: "qwen", Selector: map[string]string{"app": "q"}, EPP: inferencepool.EndpointPicker{Kind: "Service", Name: "qwen-epp", Port: 9002}},
	}
	_, err := e.RunOnce(context.Background())
	require.NoError(t, err)
	writes := e.Status.(*fakeWriter).writes
	for name, want := range map[string]struct {
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		"l4": {metav1.ConditionTrue, llmdv1alpha1.ReasonPoolFound, "InferencePool prod/llama (endpoint picker Service llama-epp.prod.svc:9002)"},
		"q":  {metav1.ConditionFalse, llmdv1alpha1.ReasonNoPoolMatches, "no InferencePool"},
	} {
		var merged llmdv1alpha1.VariantAutoscalingStatus
		MergeEngineStatus(&merged, writes[name])
		c := meta.FindStatusCondition(merged.Conditions, llmdv1alpha1.ConditionTypeInferencePoolResolved)
		require.NotNil(t, c, name)
		assert.Equal(t, want.status, c.Status, name)
		assert.Equal(t, want.reason, c.Reason, name)
		assert.Contains(t, c.Message, want.msg, name)
	}

	// Discovery off: no condition.
	e = testEngine(views, clocktesting.NewFakeClock(t0))
	e.Pools = (*inferencepool.Source)(nil)
	_, err = e.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Nil(t, meta.FindStatusCondition(e.Status.(*fakeWriter).writes["l4"].Conditions, llmdv1alpha1.ConditionTypeInferencePoolResolved))
}
