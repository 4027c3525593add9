package decide

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func f(x float64) *float64 { return &x }

func stz(enabled bool, retention time.Duration) params.ScaleToZero {
	return params.ScaleToZero{Enabled: enabled, RetentionPeriod: params.Duration(retention)}
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
		rules   map[string]decision.Rule
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
			reason: map[string]string{"v": "Fallback: preserving previous allocation (no optimizer solution); metrics source unreachable, previous 5"},
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
			// ago), all min 0, scale to zero on, retention 5m -> 0. It holds
			// where nothing runs to report: no pod of the target is Ready.
			name: "seed last-resort scenario 2: retention exceeded with no Ready pod scales to zero",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 0, MaxReplicas: 12, CurrentReplicas: 10, DesiredReplicas: 10, LastUpdate: ago(6 * time.Minute)}}},
			want:   map[string]int32{"v": 0},
			reason: map[string]string{"v": "Fallback: scale-to-zero after retention period (no metrics for >5m); last metrics 6m0s ago"},
		},
		{
			// The same scenario with the target's pods Ready: series absent
			// is a scraping fault, not idleness; the 10 replicas are held.
			name: "seed last-resort scenario 2 with Ready pods holds",
			in: Input{Metrics: MetricsMissing, ScaleToZero: stz(true, 5*time.Minute), MetricsLastSeen: ago(time.Hour),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 0, MaxReplicas: 12, CurrentReplicas: 10, DesiredReplicas: 10, LastUpdate: ago(6 * time.Minute)}}},
			want:   map[string]int32{"v": 10},
			reason: map[string]string{"v": "Holding 10: the group's pods are Ready but none reports vLLM metrics"},
			rules:  map[string]decision.Rule{"v": decision.RuleMetricsMissing},
		},
		{
			name: "missing with Ready pods keeps a scale-up under way, scale to zero disabled",
			in: Input{Metrics: MetricsMissing, ScaleToZero: stz(false, 5*time.Minute), MetricsLastSeen: ago(time.Hour),
				Variants: []v{{Name: "a", Cost: 15, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 3, LastUpdate: ago(time.Hour)}, {Name: "b", Cost: 5, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(time.Hour)}}},
			want:    map[string]int32{"a": 3, "b": 2},
			actions: map[string]decision.Action{"a": decision.ActionScaleUp, "b": decision.ActionNone},
		},
		{
			name: "missing with Ready pods stays within bounds",
			in: Input{Metrics: MetricsMissing, ScaleToZero: stz(true, 5*time.Minute),
				Variants: []v{{Name: "v", Cost: 5, MinReplicas: 1, MaxReplicas: 3, CurrentReplicas: 5}}},
			want: map[string]int32{"v": 3},
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
			for name, r := range tc.rules {
				assert.Equal(t, r, byName[name].Rule, name)
			}
		})
	}
}

// Whatever the inputs, the enforcer never leaves [min, max] and never goes
// down while metrics are unreachable or missing with Ready pods.
func TestEnforceInvariants(t *testing.T) {
	states := []MetricsState{MetricsAvailable, MetricsAbsent, MetricsMissing, MetricsUnreachable}
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
							if state == MetricsMissing {
								assert.Equal(t, decision.Clamp(max(current, desired), min, 6), got.Replicas, "missing with Ready pods never goes down")
							}
						}
					}
				}
			}
		}
	}
}

// Scale to zero under faults: a woken group, requests at the gateway and a
// missing request counter never lead to a decision of zero; idleness needs
// the counter at 0 and no load anywhere.
func TestEnforceZeroNeedsEvidence(t *testing.T) {
	woken := func(at time.Time, startup time.Duration) []v {
		return []v{{Name: "w", Cost: 5, MaxReplicas: 4, CurrentReplicas: 1, DesiredReplicas: 0, LastUpdate: ago(15 * time.Minute),
			ScaledFromZeroAt: at, StartupAllowance: startup}}
	}
	atZero := func() []v {
		return []v{{Name: "cheap", Cost: 5, MaxReplicas: 4, LastUpdate: ago(time.Hour)}, {Name: "dear", Cost: 15, MaxReplicas: 4, LastUpdate: ago(time.Hour)}}
	}
	four := []v{{Name: "v", Cost: 5, MaxReplicas: 8, CurrentReplicas: 4, DesiredReplicas: 4, LastUpdate: ago(time.Hour)}}
	pods := func(n int, kv, queue float64) []decision.ReplicaMetrics {
		var out []decision.ReplicaMetrics
		for i := 0; i < n; i++ {
			out = append(out, decision.ReplicaMetrics{Pod: string(rune('a' + i)), Variant: "v", KvCacheUsage: kv, QueueLength: queue})
		}
		return out
	}
	stz10 := stz(true, 10*time.Minute)
	cases := []struct {
		name   string
		in     Input
		want   map[string]int32
		rule   decision.Rule
		reason string
	}{
		{
			// The defect: the pod the fast path started is loading, no
			// series yet, and the decision to zero is 15 minutes old.
			name: "woken group with no series yet stays up within the default grace",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(40*time.Second), 0)},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked,
			reason: "w scaled from zero 40s ago, within its wake grace of 11m0s",
		},
		{
			name: "woken group: grace is the start-up allowance plus the metrics window",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(150*time.Second), 2*time.Minute)},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked, reason: "grace of 3m0s",
		},
		{
			// The allowance of a probe with huge failureThreshold x
			// periodSeconds: allowance + 1m must saturate, not wrap
			// negative and send the group back to 0 at once.
			name: "woken group with the largest allowance stays up",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(30*time.Second), time.Duration(math.MaxInt64))},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked, reason: "w scaled from zero 30s ago",
		},
		{
			name: "woken group with an allowance a second short of the largest stays up",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(30*time.Second), time.Duration(math.MaxInt64)-time.Second)},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked, reason: "w scaled from zero 30s ago",
		},
		{
			name: "woken group past its grace without metrics goes back to zero",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(4*time.Minute), 2*time.Minute)},
			want: map[string]int32{"w": 0}, rule: decision.RuleRetention,
		},
		{
			name: "woken group past the default grace goes back to zero",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(ago(12*time.Minute), 0)},
			want: map[string]int32{"w": 0}, rule: decision.RuleRetention,
		},
		{
			// A marker whose scale failed and could not be taken back
			// holds nothing once its grace has passed.
			name: "a marker left by a failed wake on a group at zero expires with its grace",
			in: Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: []v{{Name: "w", Cost: 5, MaxReplicas: 4, LastUpdate: ago(time.Hour),
				ScaledFromZeroAt: ago(12 * time.Minute)}}},
			want: map[string]int32{"w": 0},
		},
		{
			name: "a wake stamped far in the future is ignored",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz10, Variants: woken(now.Add(time.Hour), 0)},
			want: map[string]int32{"w": 0}, rule: decision.RuleRetention,
		},
		{
			// Ready and idle, nothing served yet: the counter reads 0.
			name: "woken group whose pod reports but has served nothing yet stays up",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz10, Variants: woken(ago(2*time.Minute), 0),
				Replicas: []decision.ReplicaMetrics{{Pod: "w-0", Variant: "w"}}, Targets: []decision.Target{{Variant: "w", Replicas: 1}}},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked,
		},
		{
			name: "woken group while Prometheus is down keeps the woken replica",
			in:   Input{Metrics: MetricsUnreachable, ScaleToZero: stz10, Variants: woken(ago(time.Minute), 0)},
			want: map[string]int32{"w": 1}, rule: decision.RuleZeroBlocked,
		},
		{
			name: "requests at the gateway keep an idle-looking group up",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), SchedulerQueueSize: 6, ScaleToZero: stz10,
				Variants: []v{{Name: "v", Cost: 5, MaxReplicas: 4, CurrentReplicas: 1, DesiredReplicas: 1, LastUpdate: ago(time.Hour)}},
				Replicas: pods(1, 0, 0), Targets: []decision.Target{{Variant: "v", Replicas: 1}}},
			want: map[string]int32{"v": 1}, reason: "not idle: 6 requests wait at the gateway",
		},
		{
			name: "requests at the gateway of a group at zero wake its cheapest variant",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), SchedulerQueueSize: 3, ScaleToZero: stz10, Variants: atZero()},
			want: map[string]int32{"cheap": 1, "dear": 0}, rule: decision.RuleZeroBlocked, reason: "3 requests wait at the gateway",
		},
		{
			name: "requests at the gateway block the retention rule too",
			in: Input{Metrics: MetricsAbsent, SchedulerQueueSize: 2, ScaleToZero: stz10,
				Variants: []v{{Name: "v", Cost: 5, MaxReplicas: 4, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(time.Hour)}}},
			want: map[string]int32{"v": 2}, rule: decision.RuleZeroBlocked,
		},
		{
			name: "a group at zero with an empty gateway stays at zero",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz10, Variants: atZero()},
			want: map[string]int32{"cheap": 0, "dear": 0}, rule: decision.RuleScaleToZero,
		},
		{
			// Four saturated replicas with the counter at 0 (what a
			// missing series reads as when taken for zero) are not idle.
			name: "saturated pods are not idle whatever the request count",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz10, Variants: four,
				Replicas: pods(4, 0.95, 8), Targets: []decision.Target{{Variant: "v", Replicas: 5, Rule: decision.RuleScaleUp, Reason: "saturated"}}},
			want: map[string]int32{"v": 5}, rule: decision.RuleScaleUp, reason: "not idle: pod a has 8 queued requests",
		},
		{
			name: "KV cache in use is load",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz10, Variants: four,
				Replicas: pods(4, 0.3, 0), Targets: []decision.Target{{Variant: "v", Replicas: 4}}},
			want: map[string]int32{"v": 4},
		},
		{
			name: "KV usage at about 0 with the counter at 0 is idle",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz10, Variants: four,
				Replicas: pods(4, 0.005, 0), Targets: []decision.Target{{Variant: "v", Replicas: 3}}},
			want: map[string]int32{"v": 0}, rule: decision.RuleScaleToZero,
		},
		{
			name: "missing request counter with pods reporting holds current replicas",
			in: Input{Metrics: MetricsAvailable, ScaleToZero: stz10, Variants: four,
				Replicas: pods(4, 0, 0), Targets: []decision.Target{{Variant: "v", Replicas: 3, Rule: decision.RuleScaleDown}}},
			want: map[string]int32{"v": 4}, rule: decision.RuleRequestCountMissing,
			reason: "request-count series (vllm:request_success_total) is missing, a scraping fault, not idleness",
		},
		{
			name: "missing request counter does not stop a scale-up",
			in: Input{Metrics: MetricsAvailable, ScaleToZero: stz10, Variants: four,
				Replicas: pods(4, 0.95, 8), Targets: []decision.Target{{Variant: "v", Replicas: 5, Rule: decision.RuleScaleUp}}},
			want: map[string]int32{"v": 5}, rule: decision.RuleScaleUp,
		},
		{
			name: "missing request counter with scale to zero disabled still holds",
			in: Input{Metrics: MetricsAvailable, ScaleToZero: stz(false, 10*time.Minute), Variants: four,
				Replicas: pods(4, 0, 0), Targets: []decision.Target{{Variant: "v", Replicas: 0}}},
			want: map[string]int32{"v": 4}, rule: decision.RuleRequestCountMissing,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			got := Enforce(tc.in)
			for _, tg := range got {
				assert.Equal(t, tc.want[tg.Variant], tg.Replicas, "%s: %s", tg.Variant, tg.Reason)
				if tc.rule != "" && tc.want[tg.Variant] > 0 {
					assert.Equal(t, tc.rule, tg.Rule, tg.Variant)
				}
				if tc.reason != "" && tc.want[tg.Variant] > 0 {
					assert.Contains(t, tg.Reason, tc.reason, tg.Variant)
				}
				assert.Equal(t, decision.ActionFor(variantByName(tc.in.Variants, tg.Variant).CurrentReplicas, tg.Replicas), tg.Action)
			}
			if tc.rule != "" && total(got) == 0 {
				assert.Equal(t, tc.rule, got[0].Rule)
			}
		})
	}
}

func variantByName(vs []v, name string) v {
	for _, x := range vs {
		if x.Name == name {
			return x
		}
	}
	return v{}
}

func TestRequestCountMissing(t *testing.T) {
	pod := []decision.ReplicaMetrics{{Pod: "p", Variant: "v"}}
	zeroOK := []v{{Name: "v", MaxReplicas: 4, CurrentReplicas: 1}}
	minOne := []v{{Name: "v", MinReplicas: 1, MaxReplicas: 4, CurrentReplicas: 1}}
	cases := []struct {
		name string
		in   Input
		want bool
	}{
		{"counter missing, pods reporting, zero allowed", Input{Metrics: MetricsAvailable, Replicas: pod, Variants: zeroOK}, true},
		{"counter present", Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), Replicas: pod, Variants: zeroOK}, false},
		{"no pod reporting", Input{Metrics: MetricsAvailable, Variants: zeroOK}, false},
		{"minReplicas 1: the count decides nothing", Input{Metrics: MetricsAvailable, Replicas: pod, Variants: minOne}, false},
		{"metrics absent", Input{Metrics: MetricsAbsent, Replicas: pod, Variants: zeroOK}, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, RequestCountMissing(tc.in), tc.name)
	}
}

// TestReasonsUseDesignNoteWording pins each status reason that upstream
// spells out (docs/design.md#fallback-retention-and-last-resort): its
// string, then wva's detail after a semicolon.
func TestReasonsUseDesignNoteWording(t *testing.T) {
	one := func(min int32, current, desired int32, lastUpdate time.Time) []v {
		return []v{{Name: "v", Cost: 5, MinReplicas: min, MaxReplicas: 10, CurrentReplicas: current, DesiredReplicas: desired, LastUpdate: lastUpdate}}
	}
	two := []v{
		{Name: "cheap", Cost: 5, MaxReplicas: 10, CurrentReplicas: 2, DesiredReplicas: 2, LastUpdate: ago(6 * time.Minute)},
		{Name: "dear", Cost: 15, MaxReplicas: 10, CurrentReplicas: 1, DesiredReplicas: 1, LastUpdate: ago(6 * time.Minute)},
	}
	zero := []decision.Target{{Variant: "v", Replicas: 0}}
	cases := []struct {
		name string
		in   Input
		want map[string]string // variant -> exact reason
		n    map[string]int32
		rule decision.Rule
	}{
		{
			name: "normal optimizer solution",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(40), ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 2, 2, ago(time.Hour)), Targets: []decision.Target{{Variant: "v", Replicas: 3}}},
			want: map[string]string{"v": "Optimizer solution: cost and latency optimized allocation"},
			n:    map[string]int32{"v": 3}, rule: decision.RuleSteady,
		},
		{
			name: "first run grace period",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 2, 0, time.Time{}), Targets: zero},
			want: map[string]string{"v": "First run: preserving current replicas for Prometheus discovery grace period; group idle"},
			n:    map[string]int32{"v": 2}, rule: decision.RuleFirstRunGrace,
		},
		{
			name: "optimizer returned 0 within the retention period (requests seen)",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(12), ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 3, 3, ago(90*time.Second)), Targets: zero},
			want: map[string]string{"v": "Optimizer returned 0 but retention period not exceeded (12 requests in the last 5m), preserving allocation; keeping 3"},
			n:    map[string]int32{"v": 3}, rule: decision.RuleRetentionHold,
		},
		{
			name: "optimizer returned 0, no request succeeded but a pod holds load",
			in: Input{Metrics: MetricsAvailable, RequestsInRetention: f(0), ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 1, 1, ago(time.Hour)), Targets: zero,
				Replicas: []decision.ReplicaMetrics{{Pod: "p", Variant: "v", QueueLength: 2}}},
			want: map[string]string{"v": "Optimizer returned 0 but retention period not exceeded (not idle: pod p has 2 queued requests and KV cache usage 0.000), preserving allocation; keeping 1"},
			n:    map[string]int32{"v": 1}, rule: decision.RuleRetentionHold,
		},
		{
			name: "optimizer returned 0 on a first run keeps current",
			in:   Input{Metrics: MetricsAvailable, RequestsInRetention: f(7), ScaleToZero: stz(true, 10*time.Minute), Variants: one(0, 2, 0, time.Time{}), Targets: zero},
			want: map[string]string{"v": "First run: preserving current replicas for Prometheus discovery grace period; optimizer returned 0 (7 requests in the last 10m), keeping current 2"},
			n:    map[string]int32{"v": 2}, rule: decision.RuleFirstRunGrace,
		},
		{
			name: "fallback: no optimizer solution (metrics source unreachable)",
			in:   Input{Metrics: MetricsUnreachable, ScaleToZero: stz(true, 5*time.Minute), Variants: one(2, 5, 8, ago(2*time.Minute))},
			want: map[string]string{"v": "Fallback: preserving previous allocation (no optimizer solution); metrics source unreachable, previous 8"},
			n:    map[string]int32{"v": 8}, rule: decision.RuleUnreachableHold,
		},
		{
			name: "retention scenario A: scale to zero enabled, every min 0",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 4, 4, ago(6*time.Minute))},
			want: map[string]string{"v": "Fallback: scale-to-zero after retention period (no metrics for >5m); last metrics 6m0s ago"},
			n:    map[string]int32{"v": 0}, rule: decision.RuleRetention,
		},
		{
			name: "retention scenario B: scale to zero disabled, every min 0",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(false, 5*time.Minute), Variants: two},
			want: map[string]string{
				"cheap": "Fallback: cheapest variant with 1 replica after retention period (no metrics, scaleToZero disabled)",
				"dear":  "Fallback: non-cheapest variant scaled to 0 after retention period (no metrics, scaleToZero disabled)",
			},
			n: map[string]int32{"cheap": 1, "dear": 0}, rule: decision.RuleRetention,
		},
		{
			name: "retention scenario C: a variant with minReplicas > 0",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), Variants: one(2, 4, 4, ago(6*time.Minute))},
			want: map[string]string{"v": "Fallback: using minReplicas=2 after retention period (no metrics for >5m); last metrics 6m0s ago"},
			n:    map[string]int32{"v": 2}, rule: decision.RuleRetention,
		},
		{
			name: "last resort: deployment discovered late",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 5, 0, ago(time.Minute))},
			want: map[string]string{"v": "Last resort: deployment discovered late, using current=5 (was 0)"},
			n:    map[string]int32{"v": 5}, rule: decision.RuleLastResort,
		},
		{
			name: "last resort: maintaining controller intent",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), Variants: one(2, 5, 10, ago(2*time.Minute))},
			want: map[string]string{"v": "Last resort: maintaining controller intent: max(minReplicas=2, previousOptimized=10) = 10"},
			n:    map[string]int32{"v": 10}, rule: decision.RuleLastResort,
		},
		{
			name: "last resort: first run with current=0",
			in:   Input{Metrics: MetricsAbsent, ScaleToZero: stz(true, 5*time.Minute), Variants: one(0, 0, 0, time.Time{})},
			want: map[string]string{"v": "Last resort: first run with current=0, using safe default of 1 (waiting for deployment discovery)"},
			n:    map[string]int32{"v": 1}, rule: decision.RuleLastResort,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = now
			got := Enforce(c.in)
			for _, tg := range got {
				assert.Equal(t, c.want[tg.Variant], tg.Reason, tg.Variant)
				assert.Equal(t, c.n[tg.Variant], tg.Replicas, tg.Variant)
				assert.Equal(t, c.rule, tg.Rule, tg.Variant)
			}
			assert.Len(t, got, len(c.want))
		})
	}
}

func TestShortDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{5 * time.Minute: "5m", 90 * time.Second: "1m30s", time.Hour: "1h", 30 * time.Second: "30s", 90 * time.Minute: "1h30m"} {
		assert.Equal(t, want, shortDuration(in), in.String())
	}
}
