package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestHPATolerance(t *testing.T) {
	tests := []struct {
		name     string
		behavior HPABehavior
		current  int32
		usage    float64
		want     int32
	}{
		{"stock HPA: 20 -> 21 is inside the 10% band", DefaultHPABehavior(), 20, 21, 20},
		{"stock HPA: 20 -> 22 is on the band's edge (inclusive)", DefaultHPABehavior(), 20, 22, 20},
		{"stock HPA: 20 -> 23 leaves the band", DefaultHPABehavior(), 20, 23, 23},
		{"stock HPA: 10 -> 9 is inside the band", DefaultHPABehavior(), 10, 9, 10},
		{"wva controller's HPA: tolerance 0, 20 -> 21 happens", WVAControllerBehavior(), 20, 21, 21},
		{"wva controller's HPA: 3 -> 3 holds", WVAControllerBehavior(), 3, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &HPA{Behavior: tt.behavior, Min: 1, Max: 100}
			assert.Equal(t, tt.want, h.Sync(0, tt.current, tt.usage, 1, true))
		})
	}
}

func TestHPAScaleDownStabilization(t *testing.T) {
	for _, tt := range []struct {
		name     string
		behavior HPABehavior
		window   time.Duration
	}{
		{"wva controller's HPA: 30s", WVAControllerBehavior(), 30 * time.Second},
		{"stock HPA: 300s", DefaultHPABehavior(), 300 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &HPA{Behavior: tt.behavior, Min: 1, Max: 100}
			current := int32(10)
			var scaledAt time.Duration = -1
			for at := time.Duration(0); at <= 10*time.Minute; at += 15 * time.Second {
				next := h.Sync(at, current, 4, 1, true)
				if next != current && scaledAt < 0 {
					scaledAt = at
					assert.Equal(t, int32(4), next)
				}
				current = next
			}
			assert.Equal(t, tt.window, scaledAt, "scale-down waits for the window")
		})
	}
}

func TestHPAStabilizationKeepsTheHighestRecentProposal(t *testing.T) {
	h := &HPA{Behavior: DefaultHPABehavior(), Min: 1, Max: 100}
	assert.Equal(t, int32(8), h.Sync(0, 8, 8, 1, true))
	assert.Equal(t, int32(8), h.Sync(15*time.Second, 8, 6, 1, true))
	// A brief dip to 2 does not pull the count below the window's max (6).
	assert.Equal(t, int32(8), h.Sync(30*time.Second, 8, 2, 1, true))
	assert.Equal(t, int32(6), h.Sync(301*time.Second, 8, 2, 1, true), "after the window only 6 and 2 remain")
	assert.Equal(t, int32(2), h.Sync(331*time.Second, 6, 2, 1, true))
}

func TestHPAScaleUpRateLimit(t *testing.T) {
	h := &HPA{Behavior: DefaultHPABehavior(), Min: 1, Max: 100}
	// max(4 pods, 100%) per 15 s from 2: 6.
	assert.Equal(t, int32(6), h.Sync(0, 2, 40, 1, true))
	// Within the same period the budget is spent: the period started at 2.
	assert.Equal(t, int32(6), h.Sync(10*time.Second, 6, 40, 1, true))
	// Next period: from 6, 100% -> 12.
	assert.Equal(t, int32(12), h.Sync(16*time.Second, 6, 40, 1, true))

	w := &HPA{Behavior: WVAControllerBehavior(), Min: 1, Max: 100}
	assert.Equal(t, int32(40), w.Sync(0, 2, 40, 1, true), "wva's HPA: up to 100 pods at once")
	assert.Equal(t, int32(100), w.Sync(15*time.Second, 40, 500, 1, true), "bounded by maxReplicas")
}

func TestHPAMissingMetricHolds(t *testing.T) {
	h := &HPA{Behavior: WVAControllerBehavior(), Min: 1, Max: 10}
	assert.Equal(t, int32(5), h.Sync(0, 5, 0, 0, false))
	assert.Equal(t, int32(5), h.Sync(time.Hour, 5, 0, 0, false))
}

func TestHPAZero(t *testing.T) {
	h := &HPA{Behavior: WVAControllerBehavior(), Min: 0, Max: 10}
	assert.Equal(t, int32(2), h.Sync(0, 2, 0, 1, true), "window starts full")
	assert.Equal(t, int32(0), h.Sync(30*time.Second, 2, 0, 1, true), "the HPA scales to zero itself")
	assert.Equal(t, int32(3), h.Sync(45*time.Second, 0, 3, 1, true), "and back from zero (ScaledToZero)")

	other := &HPA{Behavior: WVAControllerBehavior(), Min: 0, Max: 10}
	assert.Equal(t, int32(0), other.Sync(0, 0, 3, 1, true), "target scaled to 0 by someone else: ScalingDisabled")
	assert.Equal(t, int32(3), other.Sync(15*time.Second, 1, 3, 1, true), "active again once it has a replica")

	keda := &HPA{Behavior: DefaultHPABehavior(), Min: 1, Max: 10}
	assert.Equal(t, int32(1), keda.Sync(0, 1, 0, 1, true))
	assert.Equal(t, int32(0), keda.Sync(15*time.Second, 0, 5, 1, true), "minReplicas 1 and target at 0: disabled")
}

// The simulated HPAs of wva's policies are the controller's: its default
// behavior converted, whatever it becomes. Today's values, as a check of
// the conversion.
func TestWVAControllerBehaviorIsTheControllersDefault(t *testing.T) {
	assert.Equal(t, HPABehavior{
		UpPolicies:        []RatePolicy{{Value: 100, Period: 15 * time.Second}, {Percent: true, Value: 100, Period: 15 * time.Second}},
		DownStabilization: 30 * time.Second,
		DownPolicies:      []RatePolicy{{Percent: true, Value: 100, Period: 15 * time.Second}},
	}, WVAControllerBehavior())
}

func TestBehaviorFromAPI(t *testing.T) {
	twentieth := resource.MustParse("0.05")
	minPolicy := autoscalingv2.MinChangePolicySelect
	for _, tc := range []struct {
		name    string
		in      *autoscalingv2.HorizontalPodAutoscalerBehavior
		want    HPABehavior
		wantErr string
	}{
		{name: "none: a stock HPA's defaults", in: nil, want: DefaultHPABehavior()},
		{name: "scale-down window and tolerance set, the rest defaulted",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](60), Tolerance: &twentieth}},
			want: func() HPABehavior {
				b := DefaultHPABehavior()
				b.DownStabilization, b.DownTolerance = time.Minute, 0.05
				return b
			}()},
		{name: "policies replace the defaults",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}}},
			want: func() HPABehavior {
				b := DefaultHPABehavior()
				b.UpPolicies = []RatePolicy{{Value: 2, Period: time.Minute}}
				return b
			}()},
		{name: "selectPolicy Min is not emulated",
			in:      &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &minPolicy}},
			wantErr: "scaleDown: selectPolicy Min"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BehaviorFromAPI(tc.in)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
