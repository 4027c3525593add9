package planner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func TestPromptRate(t *testing.T) {
	cases := []struct {
		name string
		r    decision.ReplicaMetrics
		want float64
		ok   bool
	}{
		{"empty queue", decision.ReplicaMetrics{AvgInputTokens: 3400, AvgTTFTms: 320}, 3400 / 0.32, true},
		{"prefix cache hits are not computed", decision.ReplicaMetrics{AvgInputTokens: 3400, AvgTTFTms: 320, PrefixCacheHitRate: 0.5}, 1700 / 0.32, true},
		{"queued requests wait before their prompt", decision.ReplicaMetrics{AvgInputTokens: 3400, AvgTTFTms: 900, QueueLength: 3}, 0, false},
		{"no TTFT", decision.ReplicaMetrics{AvgInputTokens: 3400}, 0, false},
		{"TTFT not a number", decision.ReplicaMetrics{AvgInputTokens: 3400, AvgTTFTms: math.NaN()}, 0, false},
		{"no prompts", decision.ReplicaMetrics{AvgTTFTms: 320}, 0, false},
		{"every prompt cached", decision.ReplicaMetrics{AvgInputTokens: 3400, AvgTTFTms: 320, PrefixCacheHitRate: 1}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := promptRate(tc.r)
			assert.Equal(t, tc.ok, ok)
			assert.InDelta(t, tc.want, got, 1e-9)
		})
	}
}

// TestPromptRateFades: a reading far faster than the others (a minute's
// TTFT of short prompts against five minutes' mean prompt) is the prompts'
// prior for a while, not for good: each reading leaves forget of the
// fastest before it.
func TestPromptRateFades(t *testing.T) {
	v := decision.Variant{Name: "h100", CurrentReplicas: 1}
	rep := decision.ReplicaMetrics{Variant: "h100", AvgInputTokens: 3400, AvgTTFTms: 320}
	slo := params.SLO{TargetITLms: 100, TargetTTFTms: 2000, Attainment: 0.99}
	now := time.Date(2026, time.March, 2, 0, 0, 0, 0, time.UTC)
	vs := VariantState{PromptRate: 4 * 3400 / 0.32}
	for range 10 {
		_, vs = learn(v, []decision.ReplicaMetrics{rep}, vs, slo, 3400, 3300, 0, false, now)
		now = now.Add(30 * time.Second)
	}
	assert.InEpsilon(t, 4*3400/0.32*math.Pow(forget, 10), vs.PromptRate, 1e-9, "ten readings later")
	for range 40 {
		_, vs = learn(v, []decision.ReplicaMetrics{rep}, vs, slo, 3400, 3300, 0, false, now)
		now = now.Add(30 * time.Second)
	}
	assert.InEpsilon(t, 3400/0.32, vs.PromptRate, 1e-9, "the readings' own rate once the outlier has faded")

	// A faster reading is taken at once, and no reading (requests queue)
	// leaves what was learned.
	_, vs = learn(v, []decision.ReplicaMetrics{{Variant: "h100", AvgInputTokens: 3400, AvgTTFTms: 160}}, vs, slo, 3400, 3300, 0, false, now)
	assert.InEpsilon(t, 3400/0.16, vs.PromptRate, 1e-9)
	_, vs = learn(v, []decision.ReplicaMetrics{{Variant: "h100", AvgInputTokens: 3400, AvgTTFTms: 900, QueueLength: 4}}, vs, slo, 3400, 3300, 0, false, now.Add(30*time.Second))
	assert.InEpsilon(t, 3400/0.16, vs.PromptRate, 1e-9)
}
