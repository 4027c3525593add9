package inferencepool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func pool(ns, name string, sel map[string]string, epp string) Pool {
	return Pool{Namespace: ns, Name: name, Selector: sel, EPP: EndpointPicker{Kind: "Service", Name: epp, Port: 9002}}
}

func TestMatch(t *testing.T) {
	llama := pool("prod", "llama", map[string]string{"app": "llama"}, "llama-epp")
	llamaAll := pool("prod", "llama-all", map[string]string{"model": "llama"}, "llama-all-epp")
	other := pool("dev", "llama", map[string]string{"app": "llama"}, "dev-epp")
	everything := pool("prod", "everything", nil, "all-epp")
	pods := map[string]string{"app": "llama", "model": "llama", "pod-template-hash": "x"}
	tests := []struct {
		name       string
		pools      []Pool
		namespace  string
		labels     map[string]string
		wantPools  []string
		wantReason string
		wantStatus metav1.ConditionStatus
		wantInMsg  string
	}{
		{"one pool", []Pool{llama, other}, "prod", pods, []string{"prod/llama"}, llmdv1alpha1.ReasonPoolFound, metav1.ConditionTrue,
			"InferencePool prod/llama (endpoint picker Service llama-epp.prod.svc:9002)"},
		{"none matches", []Pool{llama}, "prod", map[string]string{"app": "mistral"}, nil, llmdv1alpha1.ReasonNoPoolMatches, metav1.ConditionFalse,
			"no InferencePool"},
		{"no pools", nil, "prod", pods, nil, llmdv1alpha1.ReasonNoPoolMatches, metav1.ConditionFalse, "no InferencePool"},
		{"two pools", []Pool{llamaAll, llama}, "prod", pods, []string{"prod/llama", "prod/llama-all"}, llmdv1alpha1.ReasonMultiplePools, metav1.ConditionFalse,
			"InferencePool prod/llama (endpoint picker Service llama-epp.prod.svc:9002); InferencePool prod/llama-all"},
		{"other namespace never matches", []Pool{other}, "prod", pods, nil, llmdv1alpha1.ReasonNoPoolMatches, metav1.ConditionFalse, "no InferencePool"},
		{"selector needs every label", []Pool{pool("prod", "p", map[string]string{"app": "llama", "tier": "gold"}, "e")}, "prod", pods, nil,
			llmdv1alpha1.ReasonNoPoolMatches, metav1.ConditionFalse, ""},
		{"empty selector selects its namespace", []Pool{everything}, "prod", pods, []string{"prod/everything"}, llmdv1alpha1.ReasonPoolFound, metav1.ConditionTrue, "all-epp"},
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Match(tt.pools, tt.namespace, tt.labels)
			var got []string
			for _, p := range r.Pools {
				got = append(got, p.Key())
			}
			assert.Equal(t, tt.wantPools, got)
			c := r.Condition(7, now)
			assert.Equal(t, llmdv1alpha1.ConditionTypeInferencePoolResolved, c.Type)
			assert.Equal(t, tt.wantReason, c.Reason)
			assert.Equal(t, tt.wantStatus, c.Status)
			assert.Contains(t, c.Message, tt.wantInMsg)
			assert.Equal(t, int64(7), c.ObservedGeneration)
			assert.Equal(t, now.Truncate(time.Second), c.LastTransitionTime.Time)
		})
	}
}

func TestFromUnstructured(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
			"metadata": map[string]any{"namespace": "prod", "name": "llama"}, "spec": spec}}
	}
	p, err := FromUnstructured(obj(map[string]any{
		"selector":          map[string]any{"matchLabels": map[string]any{"app": "llama"}},
		"targetPorts":       []any{map[string]any{"number": int64(8000)}},
		"endpointPickerRef": map[string]any{"name": "llama-epp", "port": map[string]any{"number": int64(9002)}, "failureMode": "FailClose"},
	}))
	require.NoError(t, err)
	assert.Equal(t, Pool{Namespace: "prod", Name: "llama", Selector: map[string]string{"app": "llama"},
		EPP: EndpointPicker{Kind: "Service", Name: "llama-epp", Port: 9002, FailureMode: "FailClose"}}, p)
	assert.Equal(t, "llama-epp.prod.svc:9002", p.Service())

	for name, spec := range map[string]map[string]any{
		"no endpointPickerRef": {"selector": map[string]any{"matchLabels": map[string]any{"app": "llama"}}},
		"no EPP name":          {"endpointPickerRef": map[string]any{"port": map[string]any{"number": int64(9002)}}},
		"selector not a map":   {"selector": map[string]any{"matchLabels": "app=llama"}, "endpointPickerRef": map[string]any{"name": "e"}},
	} {
		_, err := FromUnstructured(obj(spec))
		assert.Error(t, err, name)
	}
}
