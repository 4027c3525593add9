package queueing

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decide/optimizer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

func qcfg(qm params.QueueingModel) params.Resolved {
	r := params.Defaults()
	r.QueueingModel = &qm
	return r
}

func noTuning() params.Resolved {
	qm := params.DefaultQueueingModel()
	qm.TuningEnabled = false
	return qcfg(qm)
}

// learned is a state in which the filter has learned truth for variant v.
func learned(v string, replicas int32) State {
	tu := DefaultTuner()
	ts := tu.Start(truth)
	ts.Updates = 12
	return State{Analyzer: Name, Variants: map[string]VariantState{v: {Tuner: &ts, LastReplicas: replicas}}}
}

// pods builds replicas of variant v at the given arrival rates, with the
// latencies the true model predicts there (I = 1000, O = 200).
func pods(v string, rates ...float64) []decision.ReplicaMetrics {
	w := Workload{1000, 200}
	m, err := NewModel(truth, w, big)
	if err != nil {
		panic(err)
	}
	out := make([]decision.ReplicaMetrics, len(rates))
	for i, r := range rates {
		p := m.Predict(r)
		out[i] = decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", v, i), Variant: v, ArrivalRate: r,
			AvgTTFTms: p.TTFTms, AvgITLms: p.ITLms, AvgInputTokens: w.InputTokens, AvgOutputTokens: w.OutputTokens}
	}
	return out
}

func group(variants []decision.Variant, replicas ...[]decision.ReplicaMetrics) decision.Group {
	g := decision.Group{ModelID: "m", Namespace: "ns", Variants: variants}
	for _, r := range replicas {
		g.Replicas = append(g.Replicas, r...)
	}
	return g
}

func targetsOf(ts []decision.Target) map[string]int32 {
	out := map[string]int32{}
	for _, t := range ts {
		out[t.Variant] = t.Replicas
	}
	return out
}

// rate is the SLO-bound rate per replica for truth with I=1000, O=200 and
// the inferred k = 3 targets (48.2 ms, 18.25 ms): 4.914 req/s
// (TestMaxRate).
const rate = 4.914

func TestDesiredIsArrivalOverRate(t *testing.T) {
	h100 := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, MaxNumSeqs: 256}
	cases := []struct {
		name     string
		current  int32
		rates    []float64
		want     int32
		required float64
		spare    float64
	}{
		// 6.5 + 6 = 12.5 req/s; 12.5/4.914 = 2.54 -> 3. Required = 12.5 - 2*4.914 = 2.672.
		{"scale-up to ceil(12.5/4.914) = 3", 2, []float64{6.5, 6}, 3, 12.5 - 2*rate, 0},
		// 3 x 1 req/s = 3; 3/4.914 -> 1. Spare = 3*4.914 - 3 = 11.74 -> floor(11.74/4.914) = 2 removed.
		{"scale-down to ceil(3/4.914) = 1", 3, []float64{1, 1, 1}, 1, 0, 3*rate - 3},
		// 4 x 3 = 12 req/s; ceil(12/4.914) = 3: two more replicas in one decision.
		{"several replicas at once", 1, []float64{12}, 3, 12 - rate, 0},
		// 2 x 4.5 = 9 <= 2 x 4.914: steady.
		{"steady", 2, []float64{4.5, 4.5}, 2, 0, 2*rate - 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := h100
			v.CurrentReplicas = tc.current
			g := group([]decision.Variant{v}, pods("h100", tc.rates...))
			res, err := Analyzer{}.AnalyzeState(g, noTuning(), learned("h100", tc.current))
			require.NoError(t, err)
			a := res.Details.(Analysis)
			require.Len(t, a.Variants, 1)
			va := a.Variants[0]
			assert.InDelta(t, rate, va.RatePerReplica, 0.001)
			assert.Equal(t, RateModel, va.RateSource)
			assert.Equal(t, TargetInferred, va.TargetSource)
			assert.InDelta(t, 48.2, va.TargetTTFTms, 1e-9)
			assert.InDelta(t, 18.2501, va.TargetITLms, 1e-9)
			assert.InDelta(t, tc.required, res.Signal.RequiredCapacity, 0.005)
			assert.InDelta(t, tc.spare, res.Signal.SpareCapacity, 0.005)
			assert.Equal(t, tc.want, va.DesiredReplicas)
			got := targetsOf(optimizer.OptimizeGroup(g, res.Signal))
			assert.Equal(t, tc.want, got["h100"], res.Signal.Reason)
		})
	}
}

func TestTargets(t *testing.T) {
	v := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 1}
	g := group([]decision.Variant{v}, pods("h100", 4))
	observed := g.Replicas[0]

	t.Run("explicit targets win; the one left at 0 is inferred", func(t *testing.T) {
		qm := params.DefaultQueueingModel()
		qm.TuningEnabled, qm.TargetTTFTms = false, 100
		res, err := Analyzer{}.AnalyzeState(g, qcfg(qm), learned("h100", 1))
		require.NoError(t, err)
		va := res.Details.(Analysis).Variants[0]
		assert.Equal(t, 100.0, va.TargetTTFTms)
		assert.InDelta(t, 18.2501, va.TargetITLms, 1e-9)
		assert.Equal(t, "ttft explicit, itl inferred", va.TargetSource)
		assert.Equal(t, BoundITL, va.Capacity.Bound)
	})

	t.Run("untrusted parameters: observed latency x 1.5, capped", func(t *testing.T) {
		st := learned("h100", 1)
		st.Variants["h100"].Tuner.Updates = 1
		gg := g
		gg.Replicas = []decision.ReplicaMetrics{observed}
		gg.Replicas[0].AvgITLms = 150 // 1.5 x 150 = 225 -> capped at 200
		res, err := Analyzer{}.AnalyzeState(gg, noTuning(), st)
		require.NoError(t, err)
		va := res.Details.(Analysis).Variants[0]
		assert.Equal(t, TargetFallback, va.TargetSource)
		assert.InDelta(t, observed.AvgTTFTms*1.5, va.TargetTTFTms, 1e-9)
		assert.Equal(t, 200.0, va.TargetITLms)
		assert.Equal(t, ParamsSeeded, va.ParamsSource)
	})

	t.Run("a target below the idle latency sizes at utilization 1-1/k", func(t *testing.T) {
		qm := params.DefaultQueueingModel()
		qm.TuningEnabled, qm.TargetTTFTms = false, 10 // idle TTFT is 36.2 ms
		res, err := Analyzer{}.AnalyzeState(g, qcfg(qm), learned("h100", 1))
		require.NoError(t, err)
		va := res.Details.(Analysis).Variants[0]
		assert.Equal(t, RateIdleOnly, va.RateSource)
		assert.InDelta(t, va.Capacity.Saturation*(1-1.0/3), va.RatePerReplica, 1e-9)
		assert.Contains(t, va.Note, "target missed even without load")
	})
}

func TestFirstCyclesLearnAndCarryState(t *testing.T) {
	v := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}
	cfg := qcfg(params.DefaultQueueingModel())
	obs := observer(truth, 0.02, 11)
	var prev any
	for cycle := range 12 {
		var reps []decision.ReplicaMetrics
		for k := range 2 {
			o := obs(2*cycle + k)
			reps = append(reps, decision.ReplicaMetrics{Pod: fmt.Sprintf("p%d", k), Variant: "h100", ArrivalRate: o.ArrivalRate,
				AvgTTFTms: o.TTFTms, AvgITLms: o.ITLms, AvgInputTokens: o.Workload.InputTokens, AvgOutputTokens: o.Workload.OutputTokens})
		}
		res, err := Analyzer{}.AnalyzeState(group([]decision.Variant{v}, reps), cfg, prev)
		require.NoError(t, err)
		va := res.Details.(Analysis).Variants[0]
		if cycle == 0 {
			assert.Equal(t, ParamsSeeded, va.ParamsSource)
			assert.Contains(t, va.Note, "seeded")
			assert.Equal(t, TargetFallback, va.TargetSource, "seed parameters are not trusted for targets")
		}
		// The next cycle gets the state as stored JSON, as after a restart.
		b, err := json.Marshal(res.State)
		require.NoError(t, err)
		prev = json.RawMessage(b)
		if cycle == 11 {
			assert.Equal(t, ParamsLearned, va.ParamsSource)
			assert.Equal(t, TargetInferred, va.TargetSource)
			assert.Less(t, relErr(va.Params, truth), 0.1, "%+v", va.Params)
			assert.Greater(t, va.TunerUpdates, 15)
		}
	}
}

func TestTuningGuards(t *testing.T) {
	v := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 3}
	cfg := qcfg(params.DefaultQueueingModel())
	g := group([]decision.Variant{v}, pods("h100", 4, 4, 4))

	// Last cycle there were 2 replicas: a scale-up, so the tuner waits.
	res, err := Analyzer{}.AnalyzeState(g, cfg, learned("h100", 2))
	require.NoError(t, err)
	va := res.Details.(Analysis).Variants[0]
	assert.Equal(t, "settling after a scale-up", va.TuningSkipped)
	st := res.State.(State)
	assert.Equal(t, SettleCycles-1, st.Variants["h100"].SettleCycles)
	for range SettleCycles - 1 {
		res, err = Analyzer{}.AnalyzeState(g, cfg, res.State)
		require.NoError(t, err)
		assert.Equal(t, "settling after a scale-up", res.Details.(Analysis).Variants[0].TuningSkipped)
	}
	res, err = Analyzer{}.AnalyzeState(g, cfg, res.State)
	require.NoError(t, err)
	assert.Empty(t, res.Details.(Analysis).Variants[0].TuningSkipped)
	assert.Len(t, res.Details.(Analysis).Variants[0].Tuning, 3)

	// Pending replicas: no tuning.
	vp := v
	vp.PendingReplicas = 1
	res, err = Analyzer{}.AnalyzeState(group([]decision.Variant{vp}, pods("h100", 4, 4)), cfg, learned("h100", 3))
	require.NoError(t, err)
	assert.Equal(t, "1 replica(s) pending", res.Details.(Analysis).Variants[0].TuningSkipped)

	// The caller's state is never modified.
	prev := learned("h100", 3)
	before, _ := json.Marshal(prev)
	_, err = Analyzer{}.AnalyzeState(g, cfg, prev)
	require.NoError(t, err)
	after, _ := json.Marshal(prev)
	assert.JSONEq(t, string(before), string(after))
}

func TestWithoutModel(t *testing.T) {
	cfg := noTuning()
	a := decision.Variant{Name: "a", Cost: 10, MinReplicas: 0, MaxReplicas: 5}
	b := decision.Variant{Name: "b", Cost: 5, MinReplicas: 0, MaxReplicas: 5}

	// Requests queued in the EPP, nothing runs, nothing learned: one replica
	// on the cheapest variant.
	g := group([]decision.Variant{a, b})
	g.SchedulerQueueSize = 3
	res, err := Analyzer{}.AnalyzeState(g, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]int32{"a": 0, "b": 1}, targetsOf(optimizer.OptimizeGroup(g, res.Signal)), res.Signal.Reason)

	// ... but not again while that replica is pending.
	b.CurrentReplicas, b.PendingReplicas = 1, 1
	g = group([]decision.Variant{a, b})
	g.SchedulerQueueSize = 3
	res, err = Analyzer{}.AnalyzeState(g, cfg, nil)
	require.NoError(t, err)
	assert.Zero(t, res.Signal.RequiredCapacity)
	assert.Contains(t, res.Signal.Reason, "waiting for 1 pending")

	// Idle, nothing known: nothing to do.
	res, err = Analyzer{}.AnalyzeState(group([]decision.Variant{a}), cfg, nil)
	require.NoError(t, err)
	assert.Zero(t, res.Signal.RequiredCapacity)
	assert.Zero(t, res.Signal.SpareCapacity)

	// A variant at zero with a learned model, EPP queue waiting: one replica.
	a.CurrentReplicas = 0
	g = group([]decision.Variant{a})
	g.SchedulerQueueSize = 2
	st := learned("a", 0)
	w := Workload{1000, 200}
	vs := st.Variants["a"]
	vs.Workload = &w
	st.Variants["a"] = vs
	res, err = Analyzer{}.AnalyzeState(g, cfg, st)
	require.NoError(t, err)
	assert.Equal(t, map[string]int32{"a": 1}, targetsOf(optimizer.OptimizeGroup(g, res.Signal)), res.Signal.Reason)
	assert.Equal(t, "remembered", res.Details.(Analysis).Variants[0].WorkloadSource)

	// Another analyzer's state is ignored.
	res, err = Analyzer{}.AnalyzeState(group([]decision.Variant{a}), cfg, json.RawMessage(`{"analyzer":"saturation-token","variants":{"a":{"perReplicaCapacity":5}}}`))
	require.NoError(t, err)
	assert.Empty(t, res.State.(State).Variants["a"].Tuner)
}

// Property: with the model fixed, more arrivals never yield fewer
// replicas, whichever variants the load lands on.
func TestMoreArrivalsNeverFewerReplicas(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := noTuning()
	for trial := range 200 {
		variants := []decision.Variant{
			{Name: "a", Cost: 1 + rng.Float64()*20, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 1 + rng.Int32N(4)},
			{Name: "b", Cost: 1 + rng.Float64()*20, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 1 + rng.Int32N(4)},
		}
		st := learned("a", variants[0].CurrentReplicas)
		other := DefaultTuner().Start(Params{Alpha: 8, Beta: 0.04, Gamma: 3e-4})
		other.Updates = 5
		st.Variants["b"] = VariantState{Tuner: &other, LastReplicas: variants[1].CurrentReplicas}
		loads := make([]float64, 6)
		for i := range loads {
			loads[i] = rng.Float64() * 40
		}
		sort.Float64s(loads)
		prevTotal := int32(-1)
		for _, load := range loads {
			var reps []decision.ReplicaMetrics
			for _, v := range variants {
				share := load / float64(variants[0].CurrentReplicas+variants[1].CurrentReplicas)
				for range v.CurrentReplicas {
					reps = append(reps, pods(v.Name, share)...)
				}
			}
			for i := range reps {
				reps[i].Pod = fmt.Sprintf("p%d", i)
			}
			g := group(variants, reps)
			res, err := Analyzer{}.AnalyzeState(g, cfg, st)
			require.NoError(t, err)
			var total int32
			for _, n := range targetsOf(optimizer.OptimizeGroup(g, res.Signal)) {
				total += n
			}
			require.GreaterOrEqual(t, total, prevTotal, "trial %d, load %.2f: %s", trial, load, res.Signal.Reason)
			prevTotal = total
		}
	}
}

func TestStateDecoding(t *testing.T) {
	st := learned("v", 2)
	for _, prev := range []any{st, &st, json.RawMessage(mustJSON(t, st)), mustJSON(t, st), string(mustJSON(t, st))} {
		got, ok := analyzer.DecodeState[State](prev)
		require.True(t, ok, "%T", prev)
		assert.Equal(t, st.Variants["v"].Tuner.Params, got.Variants["v"].Tuner.Params)
	}
	for _, prev := range []any{nil, 42, "not json", json.RawMessage("null")} {
		_, ok := analyzer.DecodeState[State](prev)
		assert.False(t, ok, "%v", prev)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// BenchmarkAnalyzer1000Groups is one engine cycle of the SLO analyzer for
// 1,000 groups of one variant with two replicas: two filter updates (each
// four model solves) and the capacity search per group.
func BenchmarkAnalyzer1000Groups(b *testing.B) {
	cfg := qcfg(params.DefaultQueueingModel())
	v := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, CurrentReplicas: 2}
	g := group([]decision.Variant{v}, pods("h100", 4, 5))
	st := learned("h100", 2)
	for b.Loop() {
		for range 1000 {
			if _, err := (Analyzer{}).AnalyzeState(g, cfg, st); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Only replicas that report both latencies weigh in their mean: one with
// traffic but an infinite ITL, or none at all, neither dilutes nor poisons
// it, and the analysis still serializes.
func TestObservedLatenciesSkipNonFinite(t *testing.T) {
	v := decision.Variant{Name: "h100", Cost: 15, MinReplicas: 1, MaxReplicas: 10, MaxNumSeqs: 256, CurrentReplicas: 3}
	cases := []struct {
		name      string
		ttft, itl float64
	}{
		{"infinite ITL", 40, math.Inf(1)},
		{"infinite TTFT", math.Inf(1), 15},
		{"no latency reported", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reps := pods("h100", 2, 2, 3)
			reps[2].AvgTTFTms, reps[2].AvgITLms = tc.ttft, tc.itl
			g := group([]decision.Variant{v}, reps)
			res, err := Analyzer{}.AnalyzeState(g, noTuning(), learned("h100", 3))
			require.NoError(t, err)
			va := res.Details.(Analysis).Variants[0]
			assert.InDelta(t, reps[0].AvgTTFTms, va.ObservedTTFTms, 1e-9)
			assert.InDelta(t, reps[0].AvgITLms, va.ObservedITLms, 1e-9)
			assert.InDelta(t, 7, va.ArrivalRate, 1e-9, "its traffic still counts as demand")
			_, err = json.Marshal(res.Details)
			assert.NoError(t, err)
		})
	}
}
