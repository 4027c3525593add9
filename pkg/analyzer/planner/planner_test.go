package planner

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cfg() params.Resolved {
	r := params.Defaults()
	r.Scaling.AnalyzerName = Name
	return r
}

func fleet(l4, h100 int32, rate float64) decision.Group {
	g := decision.Group{ModelID: "m", Namespace: "ns", Now: t0, GatewayArrivalRate: rate, GatewayArrivalsReported: true,
		Variants: []decision.Variant{
			{Name: "l4", Cost: 5, MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: l4, MaxNumSeqs: 64, StartupDelay: 2 * time.Minute},
			{Name: "h100", Cost: 15, MinReplicas: 0, MaxReplicas: 8, CurrentReplicas: h100, MaxNumSeqs: 256, StartupDelay: 3 * time.Minute},
		}}
	// No TTFT: the L4s' line is the fixture's whole server model (a TTFT
	// read with nothing queued would add the prompts' prior, promptPrior).
	for i := range l4 {
		g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "l4-" + string(rune('a'+i)), Variant: "l4",
			NumGPUBlocks: 2048, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
			ArrivalRate: rate / float64(l4+h100), AvgITLms: fixtureITLms(rate / float64(l4+h100))})
	}
	return g
}

// fixtureITLms is the L4s' mean ITL at r requests per second each: 20 ms
// idle, the 100 ms target at 8 req/s (1/ITL = 50 - 5r), and 100 ms past
// it (saturated).
func fixtureITLms(r float64) float64 {
	if d := 50 - 5*r; d > 10 {
		return 1000 / d
	}
	return 100
}

// learnedFleet is the state after the fleet's L4s served up to rate for
// ten minutes: their line learned from points along it.
func learnedFleet(t *testing.T, l4 int32, rate float64) any {
	t.Helper()
	var st any
	for i := range 20 {
		g := fleet(l4, 0, rate*float64(1+i%4)/4)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		_, _, st = run(t, g, st)
	}
	return st
}

func run(t *testing.T, g decision.Group, prev any) (Analysis, decision.Signal, any) {
	t.Helper()
	res, err := Analyzer{}.AnalyzeState(g, cfg(), prev)
	require.NoError(t, err)
	_, err = json.Marshal(res.Details)
	require.NoError(t, err)
	b, err := json.Marshal(res.State)
	require.NoError(t, err)
	return res.Details.(Analysis), res.Signal, json.RawMessage(b)
}

func total(sig decision.Signal) int32 {
	var n int32
	for _, c := range sig.PlannedReplicas {
		n += c
	}
	return n
}

// More arrivals never plan fewer replicas, from the same fleet and memory.
func TestMoreArrivalsNeverFewerReplicas(t *testing.T) {
	_, _, st := run(t, fleet(2, 0, 2), nil)
	prevCost := -1.0
	for rate := 0.0; rate <= 40; rate += 0.5 {
		g := fleet(2, 0, rate)
		g.Now = t0.Add(30 * time.Second)
		_, sig, _ := run(t, g, st)
		cost := 5*float64(sig.PlannedReplicas["l4"]) + 15*float64(sig.PlannedReplicas["h100"])
		assert.GreaterOrEqual(t, cost, prevCost, "rate %.1f", rate)
		var supply float64
		for v, n := range sig.PlannedReplicas {
			supply += float64(n) * sig.CapacityPerReplica[v]
		}
		if sig.PlannedReplicas["l4"] < 20 || sig.PlannedReplicas["h100"] < 8 {
			assert.GreaterOrEqual(t, supply, rate, "rate %.1f: the plan covers demand", rate)
		}
		prevCost = cost
	}
}

// slow is a replica's TPOT histogram with half its requests over the
// 100 ms ITL target: saturation evidence.
var slow = decision.Histogram{Bounds: []float64{0.05, 0.1, 0.15, math.Inf(1)}, Counts: []float64{1, 1, 2, 2}}

// seasoned is a group's memory with minRiseHistory of rises recorded (none
// of them large): old enough for a short hold after a first burst.
func seasoned() State {
	return State{Analyzer: Name, RiseHistory: RiseHistory{Since: t0.Add(-minRiseHistory)}}
}

// minuteFleet runs the planner on an l4-only group one cycle a minute,
// starting what each cycle plans before the next. The replicas' ITL
// follows one curve (20 ms idle, 100 ms at 8 req/s), so what is learned
// in a lull does not move the capacity the hold is counted in.
type minuteFleet struct {
	t       *testing.T
	startup time.Duration
	// reportTPOT gives the replicas TPOT histograms (cycle's share of
	// their requests over the ITL target); without it they report none.
	reportTPOT bool
	st         any
	l4         int32
	at         time.Duration // the next cycle's time after t0
}

func (f *minuteFleet) cycle(rate, overShare float64) decision.Signal {
	g := fleet(f.l4, 0, rate)
	g.Variants[1].MaxReplicas, g.Variants[1].StartupDelay = 0, 0
	g.Variants[0].StartupDelay = f.startup
	g.Now = t0.Add(f.at)
	for i := range g.Replicas {
		g.Replicas[i].AvgITLms = 1000 / math.Max(50-5*g.Replicas[i].ArrivalRate, 2)
		if f.reportTPOT {
			g.Replicas[i].TPOT = tpot(g.Replicas[i].ArrivalRate, overShare)
		}
	}
	var sig decision.Signal
	_, sig, f.st = run(f.t, g, f.st)
	f.l4 = sig.PlannedReplicas["l4"]
	f.at += time.Minute
	return sig
}

// BenchmarkPlanner1000Groups: one engine cycle of 1,000 two-variant groups
// of 10 replicas each, from a learned state (the scale goal: under
// 100 ms of CPU per cycle).
func BenchmarkPlanner1000Groups(b *testing.B) {
	g := fleet(10, 0, 12)
	g.Variants[1].CurrentReplicas = 0
	_, _, st := run(&testing.T{}, g, nil)
	g.Now = t0.Add(30 * time.Second)
	for b.Loop() {
		for range 1000 {
			if _, err := (Analyzer{}).AnalyzeState(g, cfg(), st); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// The rates the engine exports are the plan's: in a lull the required
// rate is the held peak, not the lull's own demand.
func TestRatesReportThePlan(t *testing.T) {
	st := learnedFleet(t, 4, 6)
	g := fleet(4, 0, 1)
	g.Now = t0.Add(10 * time.Minute)
	an, _, _ := run(t, g, st)
	require.Greater(t, an.Held, an.Staffed+1, "the hold keeps the peak's plan through the lull")

	r := an.Rates()
	assert.Equal(t, an.ArrivalRate, r.Arrivals)
	assert.InDelta(t, 1, r.Arrivals, 1e-9)
	assert.Equal(t, an.Held, r.Required)
	assert.Equal(t, an.Supply, r.Supply)
	require.Len(t, r.PerReplica, 2)
	for _, v := range an.Variants {
		assert.Equal(t, v.Capacity.Rate, r.PerReplica[v.Name], v.Name)
		assert.Positive(t, r.PerReplica[v.Name], v.Name)
	}
	assert.InDelta(t, 4*r.PerReplica["l4"], r.Supply, 1e-9, "four L4s supply four replicas' rate")
}
