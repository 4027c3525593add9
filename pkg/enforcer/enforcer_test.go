package enforcer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func f(x float64) *float64 { return &x }

func stz(enabled bool, retention time.Duration) config.ScaleToZero {
	return config.ScaleToZero{Enabled: enabled, RetentionPeriod: config.Duration(retention)}
}

type v = decision.Variant

func TestEnforce(t *testing.T) {
	twoVariants := func(min int32, lastUpdate time.Time) []v {
		return []v{
			{Name: "cheap", Cost: 5, MinReplicas: min, MaxReplicas: 10, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: lastUpdate},
			{Name: "dear", Cost: 15, MinReplicas: min, MaxReplicas: 10, CurrentReplicas: 1, DesiredReplicas: 1, LastUpdate: lastUpdate},
		}
	}
	optimized := []decision.Target{{Variant: "cheap", Replicas: 3, Reason: "scale-up"}, {Variant: "dear", Replicas: 1, Reason: "no change"}}
	cases := []struct {
		name    string
		in      Input
		want    map[string]int32
		reason  map[string]string
		actions map[string]decision.Action
	}{
		{
			name: "optimizer targets pass through when traffic flows",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(120), ScaleToZero: stz(true, 10*time.Minute), Variants: twoVariants(0, ago(time.Hour)), Targets: optimized},
			want: map[string]int32{"cheap": 3, "dear": 1}, reason: map[string]string{"cheap": "scale-up"},
			actions: map[string]decision.Action{"cheap": decision.ActionScaleUp, "dear": decision.ActionNone},
		},
		{
			name:    "idle group scales to zero when enabled and every min is 0",
			in:      Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(true, 10*time.Minute), Variants: twoVariants(0, ago(time.Hour)), Targets: optimized},
			want:    map[string]int32{"cheap": 0, "dear": 0},
			reason:  map[string]string{"cheap": "Scale-to-zero: no requests in retention period (10m0s)"},
			actions: map[string]decision.Action{"cheap": decision.ActionScaleDown, "dear": decision.ActionScaleDown},
		},
		{
			name:   "idle group on the first run keeps current replicas (discovery grace)",
			in:     Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(true, 10*time.Minute), Variants: twoVariants(0, time.Time{}), Targets: optimized},
			want:   map[string]int32{"cheap": 2, "dear": 1},
			reason: map[string]string{"dear": "First run: preserving current replicas"},
		},
		{
			name: "scale to zero is skipped when any minReplicas > 0",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(true, 10*time.Minute), Targets: optimized,
				Variants: []v{{Name: "cheap", Cost: 5, MaxReplicas: 10, CurrentReplicas: 2, LastUpdate: ago(time.Hour)}, {Name: "dear", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1, LastUpdate: ago(time.Hour)}}},
			want: map[string]int32{"cheap": 3, "dear": 1},
		},
		{
			name: "unknown request count never scales to zero",
			in:   Input{Metrics: MetricsAvailable, ScaleToZero: stz(true, 10*time.Minute), Variants: twoVariants(0, ago(time.Hour)), Targets: optimized},
			want: map[string]int32{"cheap": 3, "dear": 1},
		},
		{
			name: "scale to zero disabled: cheapest keeps one replica",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(false, 10*time.Minute),
				Variants: []v{{Name: "b-cheap", Cost: 5, MaxReplicas: 10, LastUpdate: ago(time.Hour)}, {Name: "a-dear", Cost: 15, MaxReplicas: 10, LastUpdate: ago(time.Hour)}},
				Targets:  []decision.Target{{Variant: "b-cheap", Replicas: 0}, {Variant: "a-dear", Replicas: 0}}},
			want:   map[string]int32{"b-cheap": 1, "a-dear": 0},
			reason: map[string]string{"b-cheap": "cheapest variant keeps 1 replica"},
		},
		{
			name: "idle with scale to zero disabled: cheapest 1, others 0",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(false, 10*time.Minute),
				Variants: twoVariants(0, ago(time.Hour)), Targets: optimized},
			want:    map[string]int32{"cheap": 1, "dear": 0},
			reason:  map[string]string{"cheap": "cheapest variant keeps 1 replica", "dear": "Scale-to-zero disabled: no requests"},
			actions: map[string]decision.Action{"cheap": decision.ActionScaleDown, "dear": decision.ActionScaleDown},
		},
		{
			name: "optimizer targets are clamped to bounds",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(5), ScaleToZero: stz(false, 10*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 2, MaxReplicas: 4, CurrentReplicas: 3, LastUpdate: ago(time.Hour)}},
				Targets:  []decision.Target{{Variant: "v", Replicas: 9}}},
			want: map[string]int32{"v": 4},
		},
		{
			name: "unreachable metrics preserve the previous decision, even long after",
			in: Input{Metrics: MetricsUnreachable, RequestsInRetention: f(0), MetricsLastSeen: ago(24 * time.Hour), ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 0, MaxReplicas: 10, CurrentReplicas: 5, DesiredReplicas: 5, LastUpdate: ago(24 * time.Hour)}}},
			want:   map[string]int32{"v": 5},
			reason: map[string]string{"v": "Fallback: metrics source unreachable, preserving previous allocation 5"},
		},
		{
			name: "unreachable metrics on the first run keep current",
			in: Input{Metrics: MetricsUnreachable, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MaxReplicas: 10, CurrentReplicas: 3}}},
			want:   map[string]int32{"v": 3},
			reason: map[string]string{"v": "first run, keeping current 3"},
		},
		{
			// scaling-behavior.md, fallback example: current 5, desired 8
			// (2 min ago), min 2, retention 5m -> 8.
			name: "seed fallback example keeps controller intent within retention",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 2, MaxReplicas: 12, CurrentReplicas: 5, DesiredReplicas: 8, LastUpdate: ago(2 * time.Minute)}}},
			want:   map[string]int32{"v": 8},
			reason: map[string]string{"v": "Last resort: maintaining controller intent: max(minReplicas=2, previousOptimized=8) = 8"},
		},
		{
			// scaling-behavior.md, last resort scenario 1: previous 10,
			// current 5, min 2, max 12 -> 10.
			name: "seed last-resort scenario 1",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 2, MaxReplicas: 12, CurrentReplicas: 5, DesiredReplicas: 10, LastUpdate: ago(2 * time.Minute)}}},
			want: map[string]int32{"v": 10},
		},
		{
			// scaling-behavior.md, last resort scenario 2: previous 10 (6 min
			// ago), all min 0, scale to zero on, retention 5m -> 0.
			name: "seed last-resort scenario 2: retention exceeded scales to zero",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 0, MaxReplicas: 12, CurrentReplicas: 10, DesiredReplicas: 10, LastUpdate: ago(6 * time.Minute)}}},
			want:   map[string]int32{"v": 0},
			reason: map[string]string{"v": "Fallback: scale-to-zero after retention period (no metrics for 6m0s > 5m0s)"},
		},
		{
			name: "deployment discovered late uses current",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 0, MaxReplicas: 12, CurrentReplicas: 5, DesiredReplicas: 1, LastUpdate: ago(time.Minute)}}},
			want:   map[string]int32{"v": 5},
			reason: map[string]string{"v": "Last resort: deployment discovered late, using current=5 (was 1)"},
		},
		{
			name: "first run with other variants running starts at 0",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "a", Cost: 5, MaxReplicas: 4, CurrentReplicas: 0}, {Name: "b", Cost: 9, MinReplicas: 1, MaxReplicas: 4, CurrentReplicas: 2}}},
			want:   map[string]int32{"a": 0, "b": 2},
			reason: map[string]string{"a": "other variants handling load, starting at 0", "b": "first run, using current=2"},
		},
		{
			name: "first run alone at 0 uses the safe default of 1",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "a", Cost: 5, MaxReplicas: 4, CurrentReplicas: 0}}},
			want:   map[string]int32{"a": 1},
			reason: map[string]string{"a": "using safe default of 1"},
		},
		{
			name: "retention exceeded, scale to zero disabled: cheapest 1, others 0",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(false, 5*time.Minute), MetricsLastSeen: ago(6 * time.Minute),
				Variants: []v{{Name: "a", Cost: 15, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(time.Hour)}, {Name: "b", Cost: 5, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(time.Hour)}}},
			want:   map[string]int32{"a": 0, "b": 1},
			reason: map[string]string{"a": "non-cheapest variant scaled to 0", "b": "cheapest variant with 1 replica"},
		},
		{
			name: "retention exceeded with a minReplicas > 0: every variant to its min",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), MetricsLastSeen: ago(6 * time.Minute),
				Variants: []v{{Name: "a", Cost: 15, MinReplicas: 2, MaxReplicas: 4, CurrentReplicas: 4, DesiredReplicas: 4, LastUpdate: ago(time.Hour)}, {Name: "b", Cost: 5, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(time.Hour)}}},
			want:   map[string]int32{"a": 2, "b": 0},
			reason: map[string]string{"a": "Fallback: using minReplicas=2 after retention period"},
		},
		{
			// The retention clock runs from when metrics were last seen, not
			// from the last decision change: a group steady for an hour
			// whose metrics vanished a minute ago keeps its replicas.
			name: "retention runs from metrics last seen",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), MetricsLastSeen: ago(time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MaxReplicas: 10, CurrentReplicas: 3, DesiredReplicas: 3, LastUpdate: ago(time.Hour)}}},
			want: map[string]int32{"v": 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			got := Enforce(tc.in)
			byName := map[string]decision.Target{}
			for _, tg := range got {
				byName[tg.Variant] = tg
				assert.NotEmpty(t, tg.Reason, tg.Variant)
				assert.NotEmpty(t, tg.Action, tg.Variant)
				assert.NotEmpty(t, tg.Rule, tg.Variant)
			}
			for name, want := range tc.want {
				assert.Equal(t, want, byName[name].Replicas, "%s: %s", name, byName[name].Reason)
			}
			for name, r := range tc.reason {
				assert.Contains(t, byName[name].Reason, r, name)
			}
			for name, a := range tc.actions {
				assert.Equal(t, a, byName[name].Action, name)
			}
		})
	}
}

// Whatever the inputs, the enforcer never leaves [min, max] and never goes
// down while metrics are unreachable.
func TestEnforceInvariants(t *testing.T) {
	states := []MetricsState{MetricsAvailable, MetricsAbsent, MetricsUnreachable}
	for _, state := range states {
		for _, enabled := range []bool{true, false} {
			for _, min := range []int32{0, 1, 3} {
				for _, current := range []int32{0, 1, 4, 8} {
					for _, desired := range []int32{0, 2, 5} {
						for _, age := range []time.Duration{0, time.Minute, time.Hour} {
							var last time.Time
							if age > 0 {
								last = ago(age)
							}
							vs := []v{{Name: "v", Cost: 5, MinReplicas: min, MaxReplicas: 6, CurrentReplicas: current, DesiredReplicas: desired, LastUpdate: last}}
							in := Input{Now: now, Metrics: state, RequestsInRetention: f(0), ScaleToZero: stz(enabled, 5*time.Minute), Variants: vs,
								Targets: []decision.Target{{Variant: "v", Replicas: current + 1}}}
							got := Enforce(in)[0]
							assert.GreaterOrEqual(t, got.Replicas, min)
							assert.LessOrEqual(t, got.Replicas, int32(6))
							if state == MetricsUnreachable && !last.IsZero() {
								assert.Equal(t, decision.Clamp(desired, min, 6), got.Replicas, "unreachable preserves desired")
							}
						}
					}
				}
			}
		}
	}
}
