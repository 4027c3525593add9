package planner

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// The fit recovers the step-time plane from replicas at varied loads and
// request shapes: the two loads separate only when the shape varies.
func TestFitRecoversPlane(t *testing.T) {
	truth := Curve{P: 40, C1: 30, C2: 20}
	var f Fit
	for _, shape := range [][2]float64{{1000, 200}, {2000, 50}, {300, 400}} {
		in, out := shape[0], shape[1]
		for r := 0.2; r <= 3; r += 0.2 {
			x1, x2 := r*(in+out), r*out*(in+out/2)
			f.add(x1, x2, truth.P-truth.C1*x1/scale1-truth.C2*x2/scale2, 1)
		}
	}
	// A prior 25% off moves the fit by a fraction of that (ridge
	// shrinkage: the prior keeps one operating point from deciding alone).
	off := Curve{P: 50, C1: 37.5, C2: 15}
	got := f.solve(off)
	assert.InEpsilon(t, truth.P, got.P, 0.05)
	assert.InEpsilon(t, truth.C1, got.C1, 0.15)
	assert.InEpsilon(t, truth.C2, got.C2, 0.15)
	// With no observation the prior is the answer.
	assert.InDelta(t, off.P, Fit{}.solve(off).P, 1e-9)
	// One operating point: the plane goes through it; its slopes stay
	// non-negative.
	var one Fit
	for range 20 {
		one.add(2000, 200000, 30, 1)
	}
	c := one.solve(off)
	assert.InDelta(t, 30, c.P-c.C1*2000/scale1-c.C2*200000/scale2, 1)
	assert.GreaterOrEqual(t, c.C1, 0.0)
	assert.GreaterOrEqual(t, c.C2, 0.0)
}

// A load the replicas do not slow down under leaves its slope at zero
// and the other fitted without it: with the prior's slope kept instead,
// the intercept and the other slope bend around a cost the data do not
// show, and the plane says a replica near idle is near its limit.
func TestFitLeavesUnusedLoadAtZero(t *testing.T) {
	// Long answers whose KV costs nothing: steps lengthen only with the
	// tokens computed (1/ITL = 30 - 0.002 * tokens/s).
	var f Fit
	for _, shape := range [][2]float64{{1000, 3000}, {3000, 1500}, {2000, 4000}} {
		in, out := shape[0], shape[1]
		for r := 0.1; r <= 1; r += 0.1 {
			x1, x2 := r*(in+out), r*out*(in+out/2)
			f.add(x1, x2, 30-0.002*x1, 1)
		}
	}
	prior := Curve{P: 50, C1: 40, C2: 4}
	got := f.solve(prior)
	assert.InDelta(t, 0, got.C2, 1e-9)
	assert.InDelta(t, 30, got.P, 4)
	// The rate at the ITL target: (30 - 10) / (0.002 * 5000) = 2 req/s
	// (the prior pulls the line a little), where the prior's KV slope
	// kept would say under 0.5.
	assert.InDelta(t, 2, got.Rate(100, 2000, 3000), 0.6)
}

// A replica whose steps lengthen only with the prompts it computes (a
// decode step of 18.5 ms at idle, prompts at 10,800 tokens per second: an
// H100 pair in the simulator's server model) serving answers as long as
// their prompts. The line the planner fitted for it near idle on the
// reasoning half day at half rate (at 06:29:30) times requests at the KV
// cache's bound far too long; timed by the prompts' prior the bound comes
// where the replica reaches it.
func TestKVBoundTimedByPrompts(t *testing.T) {
	const (
		idleMs     = 18.5
		promptRate = 10800.0
		in, out    = 3400.0, 3300.0
	)
	itl := func(r float64) float64 { return idleMs / (1 - r*in/promptRate) }
	lim := Limits{MaxNumSeqs: 256, KVConcurrency: 63}
	fitted := Curve{P: 65.13, C1: 93.28}
	timing := Fit{}.solve(promptPrior(1000/idleMs, in, out, promptRate))
	// The rate where the replica holds 63 requests, each for its answer
	// at the ITL of that rate plus its share of the TTFT target.
	lo, hi := 0.0, 2.0
	for range 60 {
		mid := (lo + hi) / 2
		if mid*(out*itl(mid)/1000+ttftShare*2) > lim.KVConcurrency {
			hi = mid
		} else {
			lo = mid
		}
	}
	truth := lo

	c := capacityAt(fitted, timing, lim, startHeadroom, 100, 2000, in, out)
	assert.Equal(t, "kv-cache", c.Bound)
	assert.InEpsilon(t, truth, c.Rate, 0.01, "timed by the prompts: %.3f req/s where the replica reaches the bound at %.3f", c.Rate, truth)
	assert.InEpsilon(t, itl(truth), c.ITLms, 0.01)

	alone := capacityAt(fitted, fitted, lim, startHeadroom, 100, 2000, in, out)
	assert.Equal(t, "kv-cache", alone.Bound)
	assert.Less(t, alone.Rate, 0.75*truth, "the fitted line alone credits %.3f req/s", alone.Rate)

	// The shorter of the two times the bound: a slower second line
	// changes nothing.
	slower := Curve{P: fitted.P, C1: 2 * fitted.C1}
	assert.Equal(t, alone, capacityAt(fitted, slower, lim, startHeadroom, 100, 2000, in, out))
}

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
		_, vs = learn(v, []decision.ReplicaMetrics{rep}, vs, slo, 3400, 3300, false, now)
		now = now.Add(30 * time.Second)
	}
	assert.InEpsilon(t, 4*3400/0.32*math.Pow(forget, 10), vs.PromptRate, 1e-9, "ten readings later")
	for range 40 {
		_, vs = learn(v, []decision.ReplicaMetrics{rep}, vs, slo, 3400, 3300, false, now)
		now = now.Add(30 * time.Second)
	}
	assert.InEpsilon(t, 3400/0.32, vs.PromptRate, 1e-9, "the readings' own rate once the outlier has faded")

	// A faster reading is taken at once, and no reading (requests queue)
	// leaves what was learned.
	_, vs = learn(v, []decision.ReplicaMetrics{{Variant: "h100", AvgInputTokens: 3400, AvgTTFTms: 160}}, vs, slo, 3400, 3300, false, now)
	assert.InEpsilon(t, 3400/0.16, vs.PromptRate, 1e-9)
	_, vs = learn(v, []decision.ReplicaMetrics{{Variant: "h100", AvgInputTokens: 3400, AvgTTFTms: 900, QueueLength: 4}}, vs, slo, 3400, 3300, false, now.Add(30*time.Second))
	assert.InEpsilon(t, 3400/0.16, vs.PromptRate, 1e-9)
}

func TestCapacityBounds(t *testing.T) {
	const in, out = 800.0, 200.0
	// 1/ITL = 50 - 0.005 * tokens/s: the ITL target (100 ms) is reached
	// at (50 - 1000/100) / 0.005 tokens per second, 8 req/s, and the plan
	// takes the headroom of that rate.
	curve := Curve{P: 50, C1: 0.005 * scale1}
	atTarget := (50 - 1000/100.0) / 0.005 / (in + out)
	// A slow replica: 1/ITL = 12 - ..., the ITL of the headroom's rate
	// is over 90 ms, so requests are timed at 90 ms.
	slow := Curve{P: 12, C1: 0.0005 * scale1}
	cases := []struct {
		name     string
		curve    Curve
		lim      Limits
		bound    string
		rate     float64 // 0: where rate x request time reaches the bound
		inFlight float64
	}{
		{"itl", curve, Limits{MaxNumSeqs: 256}, "itl", startHeadroom * atTarget, 0},
		{"kv cache", curve, Limits{MaxNumSeqs: 256, KVConcurrency: 40}, "kv-cache", 0, 40},
		{"max-num-seqs", curve, Limits{MaxNumSeqs: 32, KVConcurrency: 400}, "max-num-seqs", 0, 32},
		{"kv cache at the ITL the plan allows", slow, Limits{MaxNumSeqs: 256, KVConcurrency: 40}, "kv-cache", 40 / (out*itlHeadroom*100/1000 + ttftShare*2), 40},
		{"infeasible", Curve{P: 5, C1: 0.005 * scale1}, Limits{MaxNumSeqs: 256}, "itl-infeasible", 1 / (out*200/1000 + ttftShare*2), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := capacityAt(tc.curve, tc.curve, tc.lim, startHeadroom, 100, 2000, in, out)
			assert.Equal(t, tc.bound, c.Bound)
			if tc.rate > 0 {
				assert.InDelta(t, tc.rate, c.Rate, 1e-6)
			}
			if tc.inFlight > 0 {
				assert.InDelta(t, tc.inFlight, c.Concurrency, 1e-6)
				assert.Less(t, c.Rate, startHeadroom*tc.curve.Rate(100, in, out))
			}
			// Little's law: rate x request time = concurrency.
			assert.InDelta(t, c.Concurrency, c.Rate*c.RequestSeconds, 1e-9)
			switch tc.bound {
			case "itl":
				// Requests are timed at the ITL the plan allows.
				assert.InDelta(t, itlHeadroom*100, c.ITLms, 1e-9)
			case "itl-infeasible":
			default:
				// Requests are timed at the curve's ITL, at most
				// the share of the target the plan allows.
				assert.InDelta(t, min(tc.curve.ITLms(c.Rate, in, out), itlHeadroom*100), c.ITLms, 1e-9)
			}
			if tc.bound != "itl-infeasible" {
				assert.InDelta(t, out*c.ITLms/1000+ttftShare*2, c.RequestSeconds, 1e-9)
			}
		})
	}
}

// mixCase is a mix search's input and the counts it should find.
type mixCase struct {
	name string
	vs   []mixVariant
	need float64
	want []int32
	ok   bool
}

func TestCheapestMix(t *testing.T) {
	l4 := mixVariant{Name: "l4", Cost: 5, Rate: 1, Min: 0, Max: 10, Lo: 0, Hi: 10}
	h100 := mixVariant{Name: "h100", Cost: 15, Rate: 4, Min: 0, Max: 5, Lo: 0, Hi: 5}
	cases := []mixCase{
		{"cheap variant alone", []mixVariant{l4, h100}, 1.5, []int32{2, 0}, true},
		{"equal cost: more rate", []mixVariant{l4, h100}, 2.5, []int32{0, 1}, true},
		{"dear variant is cheaper per unit at scale", []mixVariant{l4, h100}, 8, []int32{0, 2}, true},
		{"exact mix beats either alone", []mixVariant{l4, h100}, 9, []int32{1, 2}, true},
		{"at least one replica", []mixVariant{l4, h100}, 0, []int32{1, 0}, true},
		{"scale-up only adds", []mixVariant{l4, func() mixVariant { v := h100; v.Lo = 1; return v }()}, 4.5, []int32{1, 1}, true},
		{"beyond every max", []mixVariant{l4, h100}, 100, []int32{10, 5}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cheapestMix(tc.vs, tc.need)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			g, gok := greedyMix(tc.vs, tc.need)
			if ok && gok && tc.need > 0 {
				assert.LessOrEqual(t, mixCost(tc.vs, got), mixCost(tc.vs, g)+1e-9, "exact never dearer than greedy")
			}
		})
	}
}

func TestOrderMix(t *testing.T) {
	l4 := mixVariant{Name: "l4", Cost: 5, Rate: 1, Min: 0, Max: 10, Hi: 10}
	h100 := mixVariant{Name: "h100", Cost: 15, Rate: 4, Min: 0, Max: 5, Hi: 5}
	running := func(l4n, h100n int32) []mixVariant {
		a, b := l4, h100
		a.Lo, b.Lo = l4n, h100n
		return []mixVariant{a, b}
	}
	cases := []mixCase{
		// 6 L4 (30) serve 6; a seventh costs 5 where an H100 costs 15,
		// but 2 H100 (30) cover 7 on their own: the H100s are ordered and
		// the L4s are left for the scale-down to give back.
		{"adds toward the cheapest whole mix", running(6, 0), 7, []int32{6, 2}, true},
		{"keeps what runs when the whole mix is already there", running(1, 2), 9, []int32{1, 2}, true},
		{"adds only what the whole mix lacks", running(1, 1), 9, []int32{1, 2}, true},
		{"a replica already running counts", running(0, 2), 9, []int32{1, 2}, true},
		{"beyond every max", running(6, 0), 100, []int32{10, 5}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := orderMix(tc.vs, tc.need)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			for i, v := range tc.vs {
				assert.GreaterOrEqual(t, got[i], v.Lo, "an order never removes %s", v.Name)
			}
			if ok {
				supply := 0.0
				for i, v := range tc.vs {
					supply += float64(got[i]) * v.Rate
				}
				assert.GreaterOrEqual(t, supply+1e-9, tc.need, "the order covers the need")
			}
		})
	}
	// The cheapest addition alone would add one L4 to the six.
	inc, _ := cheapestMix(running(6, 0), 7)
	assert.Equal(t, []int32{7, 0}, inc)
}

// TestZ checks the normal quantile against published values.
func TestZ(t *testing.T) {
	for _, tc := range []struct{ p, want, delta float64 }{
		{0.5, 0, 1e-12},
		{0.9, 1.28155, 1e-5},
		{0.95, 1.64485, 1e-5},
		{0.975, 1.95996, 1e-5},
		{0.99, 2.32635, 1e-5},
		{0.999, 3.09023, 1e-5},
		{0.9999, 3.71902, 1e-5},
		{0.01, -2.32635, 1e-5},
	} {
		assert.InDelta(t, tc.want, z(tc.p), tc.delta, "z(%g)", tc.p)
	}
}

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

// Replicas already ordered (pending) are supply: a cycle that sees them
// pending does not order them again.
func TestPendingNotReordered(t *testing.T) {
	g := fleet(2, 0, 12)
	an, sig, st := run(t, g, nil)
	require.Greater(t, total(sig), int32(2), "demand 12 req/s needs more than two replicas: %s", sig.Reason)
	// Next cycle: the ordered replicas exist but are not ready.
	g2 := fleet(2, 0, 12)
	g2.Now = t0.Add(30 * time.Second)
	for i := range g2.Variants {
		v := &g2.Variants[i]
		v.CurrentReplicas = sig.PlannedReplicas[v.Name]
		v.PendingReplicas = v.CurrentReplicas - map[string]int32{"l4": 2}[v.Name]
	}
	_, sig2, _ := run(t, g2, st)
	assert.Equal(t, sig.PlannedReplicas, sig2.PlannedReplicas, "first plan %+v", an)
}

// A lull keeps a burst's replicas for the hold: three start-up delays
// after a first burst (nothing says it comes back), twelve or the learned
// hold once a burst has come back within twelve, or while the group is
// too young to have shown whether its bursts come back; past it they are
// released. A start-up shorter than the 1-minute metrics window counts as
// the window.
func TestHoldThroughShortLulls(t *testing.T) {
	type segment struct {
		minutes int
		rate    float64
	}
	const startup = 3 * time.Minute
	cases := []struct {
		name    string
		startup time.Duration
		young   bool
		// learned is the hold factor the group starts with (0: the first).
		learned  float64
		segments []segment
		// held is how long after the last burst minute the burst's
		// replicas are kept at least, released how long at most.
		held, released time.Duration
	}{
		{"a first burst: three start-ups", startup, false, 0, []segment{{10, 1}, {5, 12}}, 3 * startup, 3*startup + 2*time.Minute},
		// The burst comes back within the hold: the second one's
		// replicas are kept for the full hold.
		{"a burst that came back: twelve start-ups or more", startup, false, 0, []segment{{10, 1}, {5, 12}, {5, 1}, {5, 12}}, 12 * startup, 24*startup + 2*time.Minute},
		// Bursts 50 minutes apart came back within the learned hold (32
		// start-ups, 96 minutes) but not within the first (36 minutes).
		{"bursts past the first hold apart: three start-ups", startup, false, maxHoldFactor, []segment{{10, 1}, {5, 12}, {45, 1}, {5, 12}}, 3 * startup, 3*startup + 2*time.Minute},
		{"a 30 s start-up: three metrics windows", 30 * time.Second, false, 0, []segment{{10, 1}, {5, 12}}, 3 * time.Minute, 5 * time.Minute},
		// Less than minRiseHistory of rises: the first burst's lull
		// keeps the full hold.
		{"a young group's first burst: twelve start-ups", startup, true, 0, []segment{{10, 1}, {5, 12}}, 12 * startup, 12*startup + 2*time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &minuteFleet{t: t, startup: tc.startup, l4: 2}
			if !tc.young {
				st := seasoned()
				st.HoldFactor = tc.learned
				f.st = st
			}
			for _, s := range tc.segments {
				for range s.minutes {
					f.cycle(s.rate, 0)
				}
			}
			lastBurst := f.at - time.Minute
			// The first lull cycle keeps what the burst's plan needs.
			burst := f.cycle(1, 0).PlannedReplicas["l4"]
			require.Greater(t, burst, int32(2), "the burst orders replicas")
			for f.at-lastBurst < tc.held {
				sig := f.cycle(1, 0)
				require.Equal(t, burst, sig.PlannedReplicas["l4"], "%s after the burst, within the hold: %s", f.at-time.Minute-lastBurst, sig.Reason)
			}
			for f.at-lastBurst <= tc.released {
				f.cycle(1, 0)
			}
			assert.Less(t, f.l4, burst, "past the hold the burst's replicas are released")
		})
	}
}

// TestEveningIsNotHeld: on a curve going down with no burst in memory,
// what is given back is not needed within a start-up, so the fleet
// follows the fall a start-up behind, not a short hold (three start-ups)
// behind.
func TestEveningIsNotHeld(t *testing.T) {
	const startup = 3 * time.Minute
	curve := &minuteFleet{t: t, startup: startup, l4: 2}
	for m := range 25 {
		curve.cycle(2+float64(m), 0) // 2 -> 26 req/s, 1 req/s a minute
	}
	peak := curve.l4
	for m := range 14 {
		curve.cycle(26-float64(m+1), 0) // back to 12 req/s
	}
	// What the fall's rate a start-up and a cycle ago plans when steady.
	steady := &minuteFleet{t: t, startup: startup, l4: curve.l4}
	for range 20 {
		steady.cycle(12+float64(startup/time.Minute)+1, 0)
	}
	assert.LessOrEqual(t, curve.l4, steady.l4, "the fall is followed a start-up behind")
	assert.Less(t, curve.l4, peak, "the peak's replicas are given back")
}

// TestRampForecastHeldOneStartup: a ramp's forecast (the plan with the
// trend's growth) is held for one start-up, so a release does not give back
// what the forecast of a cycle ago needed; older, it no longer holds.
func TestRampForecastHeldOneStartup(t *testing.T) {
	const forecast = 30.0
	g := fleet(4, 0, 4)
	g.Now = t0.Add(60 * time.Minute)
	for _, tc := range []struct {
		name string
		age  time.Duration
		held bool
	}{
		{"a cycle ago", time.Minute, true},
		{"two start-ups ago, within the hold", 4 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans := minutes(slices.Repeat([]float64{4}, 60)...)
			plans[60-int(tc.age/time.Minute)].Forecast = forecast
			an, _, _ := run(t, g, State{Analyzer: Name, Plans: plans, HoldFactor: holdFactor})
			if tc.held {
				assert.InDelta(t, forecast, an.Held, 1e-9)
			} else {
				assert.Less(t, an.Held, forecast/2)
			}
		})
	}
}

// On a line, the held plan keeps the forecast two start-ups ahead (the
// start-up until what is given back is needed again plus the one to get it
// back), more than the plan, which looks one start-up ahead.
func TestSteadyRiseHoldsTwoStartupsAhead(t *testing.T) {
	a, st := playRamp(t, nil, 0)
	require.Positive(t, a.Rising, "the ramp is forecast")
	var next State
	require.NoError(t, json.Unmarshal(st.(json.RawMessage), &next))
	forecast := next.Plans[len(next.Plans)-1].Forecast
	assert.Greater(t, forecast, a.Staffed, "the forecast looks further ahead than the plan")
	assert.GreaterOrEqual(t, a.Held, forecast, "the held plan keeps it")
}

// playRamp runs the planner every 30 s for ten minutes on an l4-only group
// whose arrivals rise from 2 req/s by 0.02 req/s each second, from st;
// startup, when set, is the L4's start-up delay.
func playRamp(t *testing.T, st any, startup time.Duration) (Analysis, any) {
	t.Helper()
	var a Analysis
	for i := range 20 {
		g := fleet(8, 0, 2+0.02*float64(i*30))
		g.Variants[1].MaxReplicas = 0
		if startup > 0 {
			g.Variants[0].StartupDelay = startup
		}
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		a, _, st = run(t, g, st)
	}
	return a, st
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

// Backlog is demand to drain within a start-up delay.
func TestBacklogAddsDemand(t *testing.T) {
	g := fleet(2, 0, 2)
	a, _, _ := run(t, g, nil)
	g.SchedulerQueueSize = 360
	b, _, _ := run(t, g, nil)
	assert.InDelta(t, 360/120.0, b.BacklogRate, 1e-9, "360 requests over the L4s' 2m start-up (the H100 holds no replica)")
	assert.Greater(t, b.Staffed, a.Staffed)
}

// Without the gateway's counter, demand falls back to what the replicas
// complete.
func TestDemandSource(t *testing.T) {
	g := fleet(2, 0, 4)
	g.GatewayArrivalsReported = false
	a, _, _ := run(t, g, nil)
	assert.Equal(t, "replica completions", a.ArrivalSource)
	assert.InDelta(t, 4, a.ArrivalRate, 1e-9)
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

// A drained backlog is not held: once the replicas ordered for it serve
// and the queue is gone, the plan is the one the arrivals alone ask for.
func TestHoldForgetsDrainedBacklog(t *testing.T) {
	cycle := func(prev any, at time.Duration, l4 int32, backlog float64) (Analysis, decision.Signal, any) {
		g := fleet(l4, 0, 4)
		g.Now = t0.Add(at)
		g.SchedulerQueueSize = backlog
		return run(t, g, prev)
	}
	_, _, calm := cycle(nil, 0, 2, 0)
	want, wantSig, _ := cycle(calm, 10*time.Minute, 2, 0)

	_, _, st := cycle(nil, 0, 2, 0)
	_, burst, st := cycle(st, 30*time.Second, 2, 3000)
	require.Greater(t, total(burst), total(wantSig), "the backlog orders replicas: %s", burst.Reason)
	// Ten minutes later the ordered replicas are ready and the queue is
	// drained; arrivals are what they were.
	g := fleet(burst.PlannedReplicas["l4"], burst.PlannedReplicas["h100"], 4)
	g.Now = t0.Add(10 * time.Minute)
	after, afterSig, _ := run(t, g, st)
	// The same plan; the mix may differ, as the calm fleet tries the H100
	// it has never run where the drained one already has it.
	assert.InDelta(t, want.Held, after.Held, 1e-9, "after the drain: %s", afterSig.Reason)
	assert.Less(t, total(afterSig), total(burst), "after the drain: %s", afterSig.Reason)
	assert.GreaterOrEqual(t, after.PlanSupply+1e-9, after.Held, "after the drain: %s", afterSig.Reason)
}

// A variant seen only near idle is credited at most the fair price of the
// proven one (same rate per unit of cost); seen at more than half that, its
// line is trusted up to twice the load seen; once seen at half its own
// line's rate, the line counts.
func TestUnprovenVariantAtFairPrice(t *testing.T) {
	cases := []struct {
		name     string
		h100Load float64 // req/s per H100 replica while learning
		bound    string
	}{
		{"seen near idle", 0.2, "fair-price-prior"},
		{"seen at over half the fair price", 8, "seen-load"},
		{"seen under load", 20, ""}, // its own line's bound
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			var an Analysis
			for i := range 10 {
				g := fleet(2, 1, 12)
				g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
				g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
					NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
					ArrivalRate: tc.h100Load, AvgITLms: 20 + tc.h100Load, AvgTTFTms: 200})
				an, _, st = run(t, g, st)
			}
			l4, h100 := an.Variants[1], an.Variants[0]
			require.Equal(t, "l4", l4.Name)
			require.GreaterOrEqual(t, l4.PeakLoad, provenShare*l4.Capacity.Rate, "the L4 is proven: %+v", l4)
			fair := l4.Capacity.Rate / 5 * 15
			if tc.bound != "" {
				require.Equal(t, tc.bound, h100.Capacity.Bound, "%+v", h100)
			}
			switch tc.bound {
			case "fair-price-prior":
				assert.InDelta(t, fair, h100.Capacity.Rate, 1e-9)
			case "seen-load":
				assert.Greater(t, tc.h100Load/provenShare, fair, "the fixture's load is over half the fair price")
				assert.InDelta(t, tc.h100Load/provenShare, h100.Capacity.Rate, 1e-9)
			default:
				assert.NotContains(t, []string{"fair-price-prior", "seen-load"}, h100.Capacity.Bound)
				assert.GreaterOrEqual(t, h100.PeakLoad, provenShare*h100.Capacity.Rate, "%+v", h100)
			}
		})
	}
}

// The horizon is the start-up of the variants holding replicas; a
// variant's measured start-up is kept while it has no Ready pod.
func TestStartupHorizon(t *testing.T) {
	slo := params.DefaultSLO()
	v := func(name string, current int32, measured time.Duration) decision.Variant {
		return decision.Variant{Name: name, MaxReplicas: 4, CurrentReplicas: current, StartupDelay: measured}
	}
	cases := []struct {
		name     string
		variants []decision.Variant
		learned  map[string]VariantState
		want     time.Duration
	}{
		{"only holding variants count", []decision.Variant{v("l4", 2, 2*time.Minute), v("h100", 0, 0)}, nil, 2 * time.Minute},
		{"the longest holding one", []decision.Variant{v("l4", 2, 2*time.Minute), v("h100", 1, 3*time.Minute)}, nil, 3 * time.Minute},
		{"none holding: all, unmeasured at the fallback", []decision.Variant{v("l4", 0, 0), v("h100", 0, 0)}, nil, slo.StartupDelay.D()},
		{"a remembered measurement beats the fallback", []decision.Variant{v("l4", 0, 0)},
			map[string]VariantState{"l4": {StartupDelay: 90 * time.Second}}, 90 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, startupHorizon(tc.variants, tc.learned, slo))
		})
	}
	// learn remembers the last measurement for a variant at zero.
	g := fleet(2, 0, 2)
	_, _, st := run(t, g, nil)
	g.Variants[0].StartupDelay = 0
	g.Now = t0.Add(time.Minute)
	an, _, _ := run(t, g, st)
	assert.Equal(t, "2m0s", an.Variants[1].StartupDelay, "%+v", an.Variants[1])
}

// TestTrendOf: the forecast growth is what the window shows clearly and
// is still under way, not a step already taken or a ramp that levelled
// off; only growth along a line over the whole window is steady (a ramp
// whose forecast is held for a start-up), not a burst's step.
func TestTrendOf(t *testing.T) {
	const horizon = 4 * time.Minute
	cases := []struct {
		name     string
		span     time.Duration
		rate     func(age time.Duration) float64
		min, max float64
		steadily bool
	}{
		{"ramp of 0.6 req/s per minute", 12 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() }, 2.39, 2.41, true},
		{"noisy ramp", 12 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() + rateNoise(a) }, 1.2, 2.6, true},
		{"noisy ramp of 0.35 req/s a minute", 13 * time.Minute, func(a time.Duration) float64 { return 20 - 0.35*a.Minutes() + rateNoise(a) }, 0.5, 1.4, true},
		{"noisy plateau", 12 * time.Minute, func(a time.Duration) float64 { return 5 + rateNoise(a) }, 0, 0, false},
		{"falling", 12 * time.Minute, func(a time.Duration) float64 { return 2 + 0.01*a.Seconds() }, 0, 0, false},
		{"step 2 -> 8 five minutes ago", 12 * time.Minute, func(a time.Duration) float64 {
			if a > 5*time.Minute {
				return 2 + rateNoise(a)/3
			}
			return 8 + rateNoise(a)
		}, 0, 0.5, false},
		{"step 6 -> 27 five minutes ago", 13 * time.Minute, func(a time.Duration) float64 {
			if a > 5*time.Minute {
				return 6 + rateNoise(a)/3
			}
			return 27 + rateNoise(a)
		}, 0, 3, false},
		{"step 6 -> 26 four minutes ago, six minutes of history", 6 * time.Minute, func(a time.Duration) float64 {
			if a > 4*time.Minute {
				return 6 + rateNoise(a)/3
			}
			return 26 + rateNoise(a)
		}, 0, 0.5, false}, // the window's line alone: 8.6
		{"ramp that levelled off two minutes ago", 12 * time.Minute, func(a time.Duration) float64 {
			return 9 - 0.01*max(a-2*time.Minute, 0).Seconds() + rateNoise(a)/3
		}, 0, 0.5, true}, // the little left is still along the line
		{"ramp seen for less than the window", 8 * time.Minute, func(a time.Duration) float64 { return 20 - 0.35*a.Minutes() }, 1.3, 1.41, false},
		{"history shorter than half the window", 5 * time.Minute, func(a time.Duration) float64 { return 9 - 0.01*a.Seconds() }, 0, 0, false},
	}
	// A 30s start-up: a step from idle seen through the 1m rate window is a
	// one-minute ramp, which the five-minute minimum window does not
	// extrapolate.
	ramp, cur := arrivalSeries(time.Minute, func(a time.Duration) float64 { return 1 - a.Seconds()/60 })
	assert.Zero(t, trendOf(ramp, t0, cur, 30*time.Second).Rising, "a step through the rate window")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, cur := arrivalSeries(tc.span, tc.rate)
			got := trendOf(ps, t0, cur, horizon)
			assert.GreaterOrEqual(t, got.Rising, tc.min)
			assert.LessOrEqual(t, got.Rising, tc.max)
			assert.Equal(t, tc.steadily, got.Steadily)
		})
	}
}

// arrivalSeries is the plans of the last span, one every 30 s, with the
// arrival rate f(age), and the current rate f(0).
func arrivalSeries(span time.Duration, f func(age time.Duration) float64) ([]PlanPoint, float64) {
	var ps []PlanPoint
	for age := span; age > 0; age -= 30 * time.Second {
		ps = append(ps, PlanPoint{At: t0.Add(-age), Arrivals: f(age)})
	}
	return ps, f(0)
}

// rateNoise is a fixed pattern of noise on a measured rate, by age.
func rateNoise(age time.Duration) float64 {
	return []float64{-0.3, 0.2, 0.4, -0.1, -0.4, 0.1}[int(age/(30*time.Second))%6]
}

// TestFallingIsASlopeNotAStep: a fall through every part of the window is
// a curve going down; a burst's end, or bursts ending one after the
// other, leave level parts and are lulls.
func TestFallingIsASlopeNotAStep(t *testing.T) {
	// smeared is a step from before to after at age at, seen through the
	// collector's one-minute rate.
	smeared := func(age, at time.Duration, before, after float64) float64 {
		x := min(max((age-at).Seconds()/60+0.5, 0), 1)
		return after + (before-after)*x
	}
	cases := []struct {
		name    string
		horizon time.Duration
		span    time.Duration
		rate    func(age time.Duration) float64
		want    bool
	}{
		{"a day's evening: 1 req/s less a minute", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 15 + a.Minutes() + rateNoise(a) }, true},
		{"a slow evening within the noise", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 5 + 0.05*a.Minutes() + rateNoise(a) }, false},
		{"a burst's end three minutes ago", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return smeared(a, 3*time.Minute, 24, 5) + rateNoise(a) }, false},
		{"bursts ending one after the other: 24, 17, 5 req/s", 30 * time.Second, 10 * time.Minute, func(a time.Duration) float64 {
			return smeared(a, 3*time.Minute, 17, 5) + smeared(a, 6*time.Minute, 7, 0) + rateNoise(a)
		}, false},
		{"a plateau", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 20 + rateNoise(a) }, false},
		{"a rise", 4 * time.Minute, 15 * time.Minute, func(a time.Duration) float64 { return 30 - a.Minutes() + rateNoise(a) }, false},
		{"an evening seen for less than the window", 4 * time.Minute, 8 * time.Minute, func(a time.Duration) float64 { return 15 + a.Minutes() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, cur := arrivalSeries(tc.span, tc.rate)
			assert.Equal(t, tc.want, falling(ps, t0, cur, tc.horizon))
		})
	}
}

// A shortfall orders at once when it exceeds smallShortfall of the
// supply, else only once it has lasted persistFor.
func TestLasting(t *testing.T) {
	cases := []struct {
		name       string
		since      time.Duration // before now; 0: no shortfall seen
		need       float64
		want       bool
		wantMarked bool
	}{
		{"large shortfall orders at once", 0, 12, true, false},
		{"small shortfall first seen waits", 0, 10.5, false, true},
		{"small shortfall for 30s waits", 30 * time.Second, 10.5, false, true},
		{"small shortfall for a window orders", time.Minute, 10.5, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st, next State
			if tc.since > 0 {
				st.ShortSince = t0.Add(-tc.since)
			}
			assert.Equal(t, tc.want, lasting(t0, st, &next, 10, tc.need))
			assert.Equal(t, tc.wantMarked, !next.ShortSince.IsZero())
		})
	}
}

// Through the analyzer: a plan short by a few percent keeps the fleet for
// one metrics window, then orders.
func TestSmallShortfallWaitsOneWindow(t *testing.T) {
	cycle, rate := fewPercentShort(t)
	wait := cycle(30*time.Second, rate)
	assert.Equal(t, int32(4), total(wait), wait.Reason)
	assert.Contains(t, wait.Reason, "waiting one metrics window")
	order := cycle(90*time.Second, rate)
	assert.Greater(t, total(order), int32(4), order.Reason)
}

// A small shortfall that comes back the cycle after one at the plan has
// lasted: the cycle between is noise, not its end.
func TestSmallShortfallThatComesBackOrders(t *testing.T) {
	cycle, rate := fewPercentShort(t)
	wait := cycle(30*time.Second, rate)
	require.Contains(t, wait.Reason, "waiting one metrics window")
	between := cycle(60*time.Second, rate*0.8)
	require.Equal(t, int32(4), total(between), between.Reason)
	order := cycle(90*time.Second, rate)
	assert.Greater(t, total(order), int32(4), order.Reason)
}

// fewPercentShort finds the rate that leaves four L4s, their line learned,
// a few percent short of the plan (under smallShortfall), and returns a
// cycle of that fleet at a time after the search and a rate, and the rate.
func fewPercentShort(t *testing.T) (func(at time.Duration, rate float64) decision.Signal, float64) {
	t.Helper()
	// The L4s' line learned first, so that one more cycle moves it little.
	learned := learnedFleet(t, 4, 24)
	var rate float64
	var st any
	for r := 1.0; r < 40; r += 0.05 {
		g := fleet(4, 0, r)
		g.Now = t0.Add(10 * time.Minute)
		an, _, s := run(t, g, learned)
		if an.Staffed > an.Supply*1.01 && an.Staffed < an.Supply*(1+smallShortfall) {
			rate, st = r, s
			break
		}
	}
	require.NotZero(t, rate, "some rate leaves four L4s a few percent short")
	return func(at time.Duration, rate float64) decision.Signal {
		g := fleet(4, 0, rate)
		g.Now = t0.Add(10*time.Minute + at)
		var sig decision.Signal
		_, sig, st = run(t, g, st)
		return sig
	}, rate
}

// A burst's onset is staffed arrivals two reference replicas above their
// lowest of the last start-up delay, recorded once per start-up delay and
// remembered for two holds.
func TestRisesRecordBurstOnsets(t *testing.T) {
	const horizon, hold = 4 * time.Minute, 48 * time.Minute
	now := t0.Add(time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	calm := []PlanPoint{{At: ago(3 * time.Minute), Rate: 2}, {At: ago(time.Minute), Rate: 2.5}}
	cases := []struct {
		name    string
		prev    []time.Time
		plans   []PlanPoint
		staffed float64
		want    []time.Time
	}{
		{"no history", nil, nil, 9, nil},
		{"a jump of two replicas", nil, calm, 2 + 2*1.5, []time.Time{now}},
		{"less than two replicas", nil, calm, 2 + 1.9*1.5, nil},
		{"the low is within one start-up only", nil, []PlanPoint{{At: ago(10 * time.Minute), Rate: 1}, {At: ago(time.Minute), Rate: 8}}, 9, nil},
		{"once per start-up delay", []time.Time{ago(2 * time.Minute)}, calm, 9, []time.Time{ago(2 * time.Minute)}},
		{"a second burst", []time.Time{ago(20 * time.Minute)}, calm, 9, []time.Time{ago(20 * time.Minute), now}},
		{"kept past the hold", []time.Time{ago(50 * time.Minute), ago(20 * time.Minute)}, calm, 2, []time.Time{ago(50 * time.Minute), ago(20 * time.Minute)}},
		{"forgotten past two holds", []time.Time{ago(100 * time.Minute), ago(20 * time.Minute)}, calm, 2, []time.Time{ago(20 * time.Minute)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, rises(tc.prev, tc.plans, now, tc.staffed, 1.5, horizon, hold))
		})
	}
}

// Bursts have come back when two onsets remembered are less than a hold
// apart, however long ago the first was.
func TestBurstCameBack(t *testing.T) {
	const hold = 48 * time.Minute
	at := func(minutes ...int) []time.Time {
		var out []time.Time
		for _, m := range minutes {
			out = append(out, t0.Add(time.Duration(m)*time.Minute))
		}
		return out
	}
	cases := []struct {
		name   string
		onsets []time.Time
		want   bool
	}{
		{"none", nil, false},
		{"one burst", at(10), false},
		{"ten minutes apart", at(10, 20), true},
		{"a hold apart", at(10, 58), false},
		{"the last pair close", at(0, 60, 70), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, burstCameBack(tc.onsets, hold))
		})
	}
}

// With a start-up delay short enough that the first hold is shorter than
// the trend's window, the planner still keeps the history the trend needs:
// a steady ramp is forecast.
func TestShortStartupKeepsTrendHistory(t *testing.T) {
	a, _ := playRamp(t, seasoned(), 30*time.Second)
	assert.Equal(t, (3 * decision.RateWindow).String(), a.Hold, "a first rise is held three start-ups, a 30 s one counting as the metrics window")
	// 0.02 req/s per second over a 30 s horizon.
	assert.InDelta(t, 0.6, a.Rising, 0.05, "the ramp is forecast over the start-up")
}

// A shortfall orders what covers the present plan, not a held peak the
// fleet was not short of when it was planned (a peak in req/s of another
// request shape, or of a fleet since shrunk).
func TestShortfallCoversThePresentPlan(t *testing.T) {
	g := fleet(2, 0, 24)
	g.Now = t0.Add(10 * time.Minute)
	_, burst, st := run(t, g, learnedFleet(t, 2, 12))
	perL4 := burst.CapacityPerReplica["l4"]
	require.Positive(t, perL4)
	g = fleet(3, 0, 3*perL4*1.2)
	g.Now = t0.Add(11 * time.Minute)
	an, sig, _ := run(t, g, st)
	require.Greater(t, an.Held, an.Staffed, "the burst's plan is held")
	require.Greater(t, an.Staffed, an.Supply*1.1, "short by more than 10%%: orders at once")
	var supply float64
	for v, n := range sig.PlannedReplicas {
		supply += float64(n) * sig.CapacityPerReplica[v]
	}
	assert.GreaterOrEqual(t, supply, an.Staffed, "the present plan is covered: %s", sig.Reason)
	assert.Less(t, supply, an.Held, "no replicas for the held peak: %s", sig.Reason)
}

func TestSaturationFloor(t *testing.T) {
	scaling := params.DefaultScaling()
	caps := map[string]ReplicaCapacity{"a": {Rate: 2}, "b": {Rate: 5}}
	ref := ReplicaCapacity{Rate: 2}
	hot := func(v string) decision.ReplicaMetrics { return decision.ReplicaMetrics{Variant: v, KvCacheUsage: 0.9} }
	queued := func(v string) decision.ReplicaMetrics { return decision.ReplicaMetrics{Variant: v, QueueLength: 6} }
	calm := func(v string) decision.ReplicaMetrics {
		return decision.ReplicaMetrics{Variant: v, KvCacheUsage: 0.5, QueueLength: 1}
	}
	// slow's requests (req/s in the 1m window) take 50 ms per token, or
	// 150 ms for a share of them.
	slow := func(v string, rate, share float64) decision.ReplicaMetrics {
		r := calm(v)
		r.TPOT = decision.Histogram{Bounds: []float64{0.05, 0.1, 0.15, math.Inf(1)}, Counts: []float64{rate * (1 - share), rate * (1 - share), rate, rate}}
		return r
	}
	// firstTokenLate's requests (req/s in the 1m window) wait ttftMs on
	// average for their first token.
	firstTokenLate := func(v string, rate, ttftMs float64) decision.ReplicaMetrics {
		r := calm(v)
		r.ArrivalRate, r.AvgTTFTms = rate, ttftMs
		return r
	}
	for _, tt := range []struct {
		name      string
		replicas  []decision.ReplicaMetrics
		floor     float64
		saturated int
		// settling: a variant gained ready replicas within the rate
		// window (the latency histograms predate them).
		settling bool
	}{
		{"none reporting", nil, 0, 0, false},
		{"all calm", []decision.ReplicaMetrics{calm("a"), calm("b")}, 0, 0, false},
		{"half saturated is not most", []decision.ReplicaMetrics{hot("a"), calm("b")}, 0, 1, false},
		{"most saturated: their supply and one more", []decision.ReplicaMetrics{hot("a"), queued("b"), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"queue alone saturates", []decision.ReplicaMetrics{queued("a")}, 2 + 2, 1, false},
		{"most over the ITL target", []decision.ReplicaMetrics{slow("a", 2, 0.2), slow("b", 5, 0.06), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"within five error budgets", []decision.ReplicaMetrics{slow("a", 2, 0.04), slow("b", 5, 0.04)}, 0, 0, false},
		{"too few requests to tell", []decision.ReplicaMetrics{slow("a", 0.1, 0.5)}, 0, 0, false},
		{"most over the TTFT target on average", []decision.ReplicaMetrics{firstTokenLate("a", 1, 2500), firstTokenLate("b", 1, 2100), calm("a")}, 2 + 5 + 2 + 2, 2, false},
		{"TTFT within the target", []decision.ReplicaMetrics{firstTokenLate("a", 1, 1900), firstTokenLate("b", 1, 1500)}, 0, 0, false},
		{"too few first tokens to tell", []decision.ReplicaMetrics{firstTokenLate("a", 0.1, 9000)}, 0, 0, false},
		{"over the ITL target before new replicas served", []decision.ReplicaMetrics{slow("a", 2, 0.2), slow("b", 5, 0.06), calm("a")}, 0, 0, true},
		{"over the TTFT target before new replicas served", []decision.ReplicaMetrics{firstTokenLate("a", 1, 2500), firstTokenLate("b", 1, 2100)}, 0, 0, true},
		{"queues saturate while new replicas settle", []decision.ReplicaMetrics{hot("a"), queued("b"), slow("a", 2, 0.2)}, 2 + 5 + 2 + 2, 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			floor, n, _ := saturationFloor(decision.Group{Replicas: tt.replicas}, caps, ref, scaling, params.DefaultSLO(), !tt.settling)
			assert.InDelta(t, tt.floor, floor, 1e-9)
			assert.Equal(t, tt.saturated, n)
		})
	}
}

// Replicas mostly over the ITL target prove the capacity fitted too high:
// the floor they set orders at once and is held for a short hold, so the
// next calm cycle does not give the replicas back to order them again.
func TestSlowReplicasOrderAndHold(t *testing.T) {
	var st any
	l4 := int32(3)
	cycle := func(at time.Duration, over bool) (Analysis, int32) {
		g := fleet(l4, 0, 3)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		for i := range g.Replicas {
			if over {
				g.Replicas[i].TPOT = slow
			}
		}
		an, sig, next := run(t, g, st)
		st = next
		l4 = sig.PlannedReplicas["l4"]
		return an, l4
	}
	var calm int32
	for m := range 20 {
		_, calm = cycle(time.Duration(m)*time.Minute, false)
	}
	an, ordered := cycle(20*time.Minute, true)
	assert.Positive(t, an.SlowFloor)
	require.Positive(t, an.Reporting)
	assert.Equal(t, an.Reporting, an.Slow, "every replica is over the ITL target")
	assert.Greater(t, an.SlowFloor, an.Floor, "the floor is staffed with the margin")
	assert.Contains(t, an.Summary()[0], fmt.Sprintf("under the saturation floor %.3f req/s (%d of %[2]d reporting replicas saturated, %[2]d over the ITL target; held for a short hold)", an.Floor, an.Reporting))
	assert.Greater(t, ordered, calm, "half the requests over the target order replicas at once: %s", an.Why)
	an, kept := cycle(21*time.Minute, false)
	assert.Zero(t, an.SlowFloor)
	assert.Equal(t, ordered, kept, "the next calm cycle keeps them")
	var released int32
	for m := 22; m < 60; m++ {
		_, released = cycle(time.Duration(m)*time.Minute, false)
	}
	assert.Less(t, released, ordered, "given back after the short hold")
}

// Slow replicas the rates explain (arrivals within a replica of what the
// saturated fleet serves: a fleet short of its demand) are met by the
// floor's order, which is not held: the capacity was not fitted too high,
// and the plan covers the demand once the replicas ordered serve. Slow
// replicas at a rate far under their supply are held for a short hold.
func TestSlowFloorHeldOnlyWhenRatesDoNotExplainIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		held bool
	}{
		{"rates far under the floor: held", 3, true},
		{"rates within a replica of the floor: not held", 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			var an Analysis
			for m := range 21 {
				g := fleet(3, 0, tc.rate)
				g.Variants[1].MaxReplicas = 0
				g.Now = t0.Add(time.Duration(m) * time.Minute)
				if m == 20 {
					for i := range g.Replicas {
						g.Replicas[i].TPOT = slow
					}
				}
				an, _, st = run(t, g, st)
			}
			require.Positive(t, an.Saturated, "the slow replicas set the floor")
			assert.Equal(t, an.Reporting, an.Slow)
			if !tc.held {
				assert.Zero(t, an.SlowFloor)
				assert.Contains(t, an.Summary()[0], "not held)")
				return
			}
			assert.InDelta(t, an.Staffed, an.SlowFloor, 1e-9)
			assert.Contains(t, an.Summary()[0], "held for a short hold)")
		})
	}
}

// Replicas that just took a drained backlog run full and slow for a rate
// window: that is the backlog's load, not saturation demand. With a
// start-up longer than two rate windows their floor neither orders nor is
// held then; the same replicas slow with no backlog drained (or two rate
// windows after it, or with a start-up within the two windows) still are
// saturation evidence.
func TestDrainedBacklogIsNotSaturation(t *testing.T) {
	startup := 4 * time.Minute
	cycle := func(st any, at time.Duration, backlog float64, over bool) (Analysis, decision.Signal, any) {
		g := fleet(4, 0, 4)
		g.Variants[0].StartupDelay = startup
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		g.SchedulerQueueSize = backlog
		for i := range g.Replicas {
			if over {
				g.Replicas[i].TPOT = slow
				g.Replicas[i].KvCacheUsage = 0.95
			}
		}
		return run(t, g, st)
	}
	learned := func() any {
		var st any
		for m := range 10 {
			_, _, st = cycle(st, time.Duration(m)*time.Minute, 0, false)
		}
		return st
	}

	// The control: slow replicas with no backlog drained order at once.
	slowAn, _, _ := cycle(learned(), 10*time.Minute, 0, true)
	require.True(t, slowAn.Saturated > 0 && slowAn.SlowFloor > 0, "the fixture's replicas are saturation evidence: %+v", slowAn)

	st := learned()
	_, _, st = cycle(st, 10*time.Minute, 2000, false)
	for _, at := range []time.Duration{10*time.Minute + 30*time.Second, 11 * time.Minute, 12*time.Minute + 30*time.Second} {
		an, sig, next := cycle(st, at, 0, true)
		st = next
		assert.Zero(t, an.SlowFloor, "at %s, after the drain: %s", at, sig.Reason)
		assert.NotEqual(t, WhySat, an.Why, "at %s, after the drain: %s", at, sig.Reason)
	}
	an, sig, _ := cycle(st, 13*time.Minute, 0, true)
	assert.Positive(t, an.SlowFloor, "two rate windows after the drain, slow replicas are evidence again: %s", sig.Reason)

	// A 1m start-up: the floor's replicas would serve within the windows.
	startup = time.Minute
	st = learned()
	_, _, st = cycle(st, 10*time.Minute, 2000, false)
	an, sig, _ = cycle(st, 10*time.Minute+30*time.Second, 0, true)
	assert.Positive(t, an.SlowFloor, "with a 1m start-up: %s", sig.Reason)
}

func TestLoadRate(t *testing.T) {
	w := decision.RateWindow
	plans := []PlanPoint{
		{At: t0.Add(-4 * w), Arrivals: 4},
		{At: t0.Add(-3 * w), Arrivals: 1},
		{At: t0.Add(-2 * w), Arrivals: 1},
		{At: t0.Add(-w), Arrivals: 1},
	}
	for _, tc := range []struct {
		name string
		span time.Duration
		want float64
	}{
		{"a request within one window is the window's rate", w, 3},
		{"shorter still", w / 3, 3},
		{"two windows", 2 * w, (3 + 1) / 2.0},
		{"four windows", 4 * w, (3 + 1 + 1 + 1) / 4.0},
		{"five windows reach the older burst", 5 * w, (3 + 1 + 1 + 1 + 4) / 5.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, loadRate(plans, t0, 3, tc.span), 1e-9)
		})
	}
}

// A window's burst of requests that last minutes is planned at the rate
// the requests in flight arrived at; one of requests that last seconds at
// the window's rate.
func TestLongRequestsPlanTheirInFlightRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		outTokens float64
		smoothed  bool
	}{
		{"reasoning answers", 4000, true},
		{"chat answers", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st any
			g := fleet(4, 0, 1)
			for i := range g.Replicas {
				g.Replicas[i].AvgOutputTokens = tc.outTokens
			}
			for range 10 {
				_, _, st = run(t, g, st)
				g.Now = g.Now.Add(decision.RateWindow)
			}
			g.GatewayArrivalRate = 3
			a, _, _ := run(t, g, st)
			b, _, _ := run(t, g, nil)
			assert.InDelta(t, 3, a.ArrivalRate, 1e-9)
			if tc.smoothed {
				assert.Less(t, a.LoadRate, 2.5, "one window at 3 req/s after minutes at 1")
				assert.Greater(t, a.LoadRate, 1.0)
				assert.Less(t, a.Staffed, b.Staffed, "planned below the window's rate")
			} else {
				assert.InDelta(t, 3, a.LoadRate, 1e-9)
			}
		})
	}
}

// An order tries a variant never seen running when it is within
// untriedPriceShare of the cheapest mix, and covers the plan at the fair
// price whether it tries it or not; a variant seen running before is
// priced in full.
func TestOrderTriesUntriedVariant(t *testing.T) {
	learnt := func(h100Seen bool) any {
		var st any
		for i := range 10 {
			g := fleet(2, 0, 4)
			if h100Seen {
				g = fleet(2, 1, 4)
				g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
					NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
					ArrivalRate: 0.2, AvgITLms: 20, AvgTTFTms: 200})
			}
			g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
			_, _, st = run(t, g, st)
		}
		return st
	}
	order := func(st any, rate float64) (Analysis, decision.Signal, float64) {
		g := fleet(2, 0, rate)
		g.Now = t0.Add(5 * time.Minute)
		an, sig, _ := run(t, g, st)
		return an, sig, maxSupply(g.Variants, an)
	}
	untried, seen := learnt(false), learnt(true)
	tried := 0
	for rate := 4.0; rate <= 30; rate += 0.5 {
		an, sig, most := order(untried, rate)
		seenAn, seenSig, _ := order(seen, rate)
		require.Equal(t, "fair-price-prior", an.Variants[0].Capacity.Bound, "rate %.1f", rate)
		require.Equal(t, "fair-price-prior", seenAn.Variants[0].Capacity.Bound, "rate %.1f", rate)
		assert.Empty(t, seenAn.Trying, "rate %.1f: a variant seen running is priced in full", rate)
		if an.Why == WhyHorizon || an.PlanSupply <= an.Supply {
			continue // no order
		}
		assert.GreaterOrEqual(t, an.PlanSupply+1e-9, min(an.Staffed, most), "rate %.1f: the order covers the plan at the fair price: %s", rate, sig.Reason)
		if sig.PlannedReplicas["h100"] > 0 && seenSig.PlannedReplicas["h100"] == 0 {
			tried++
			assert.Equal(t, []string{"h100"}, an.Trying, "rate %.1f", rate)
			assert.Contains(t, sig.Reason, "trying h100 (never seen running", "rate %.1f", rate)
		}
	}
	assert.Positive(t, tried, "at some rate the untried H100 is ordered where the one seen running is not")
}

// maxSupply is the supply of every variant at its maximum, at the rates
// the analysis credits.
func maxSupply(variants []decision.Variant, an Analysis) float64 {
	caps := map[string]float64{}
	for _, v := range an.Variants {
		caps[v.Name] = v.Capacity.Rate
	}
	supply := 0.0
	for _, v := range variants {
		supply += float64(v.MaxReplicas) * caps[v.Name]
	}
	return supply
}

// A variant at the fair price ties its reference on cost per unit of
// rate: the first variant stays the reference rather than whichever
// rounds lower, so the margin's request time does not flip with the rate.
func TestReferenceCapacityTies(t *testing.T) {
	variants := []decision.Variant{{Name: "h100", Cost: 15, MaxReplicas: 8}, {Name: "l4", Cost: 5, MaxReplicas: 20}}
	for r := 1.0; r < 10; r += 0.01 {
		l4 := ReplicaCapacity{Rate: r, RequestSeconds: 6}
		h100 := ReplicaCapacity{Rate: r / 5 * 15, RequestSeconds: 18}
		got := referenceCapacity(variants, map[string]ReplicaCapacity{"l4": l4, "h100": h100})
		require.Equal(t, h100, got, "rate %.2f", r)
	}
	// A cheaper unit still wins.
	got := referenceCapacity(variants, map[string]ReplicaCapacity{"l4": {Rate: 2}, "h100": {Rate: 5.9}})
	assert.InDelta(t, 2.0, got.Rate, 1e-9)
}

// Replicas ordered for a queue that saturated every replica at one scrape
// are given back while still starting once the queue is gone; those of a
// queue that stays, of a backlog still waiting, or of an order for demand
// are kept until they serve.
func TestCancelsStartingReplicasOfAQueueGone(t *testing.T) {
	const rate = 6
	queued := func(at time.Duration, st any) (Analysis, decision.Signal, any) {
		g := fleet(2, 0, rate)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(at)
		for i := range g.Replicas {
			g.Replicas[i].QueueLength = 6
		}
		return run(t, g, st)
	}
	// next is the cycle 30 s after an order of l4 replicas: those beyond
	// the two serving still start.
	next := func(st any, l4 int32, rate float64, queue, backlog float64) (Analysis, decision.Signal) {
		g := fleet(2, 0, rate)
		g.Variants[1].MaxReplicas = 0
		g.Now = t0.Add(10*time.Minute + 30*time.Second)
		g.Variants[0].CurrentReplicas, g.Variants[0].PendingReplicas = l4, l4-2
		g.SchedulerQueueSize = backlog
		for i := range g.Replicas {
			g.Replicas[i].QueueLength = queue
		}
		an, sig, _ := run(t, g, st)
		return an, sig
	}
	an, sig, st := queued(10*time.Minute, learnedFleet(t, 2, rate))
	require.Equal(t, WhySat, an.Why, sig.Reason)
	ordered := sig.PlannedReplicas["l4"]
	require.Greater(t, ordered, int32(2), sig.Reason)

	an, sig = next(st, ordered, rate, 0, 0)
	assert.Equal(t, WhyCancel, an.Why, sig.Reason)
	assert.Less(t, sig.PlannedReplicas["l4"], ordered, sig.Reason)
	assert.GreaterOrEqual(t, sig.PlannedReplicas["l4"], int32(2), "only starting replicas go: %s", sig.Reason)
	assert.GreaterOrEqual(t, an.PlanSupply+1e-9, an.Held, "down to the held plan: %s", sig.Reason)

	for _, tc := range []struct {
		name           string
		queue, backlog float64
	}{
		{"the queue stays", 6, 0},
		{"a backlog still waits at the gateway", 0, 3},
	} {
		an, sig := next(st, ordered, rate, tc.queue, tc.backlog)
		assert.NotEqual(t, WhyCancel, an.Why, "%s: %s", tc.name, sig.Reason)
		assert.GreaterOrEqual(t, sig.PlannedReplicas["l4"], ordered, "%s: %s", tc.name, sig.Reason)
	}

	// An order for demand: the hold keeps it like the demand.
	g := fleet(2, 0, 3*rate)
	g.Variants[1].MaxReplicas = 0
	g.Now = t0.Add(10 * time.Minute)
	an, sig, st = run(t, g, learnedFleet(t, 2, rate))
	require.NotEqual(t, WhySat, an.Why, sig.Reason)
	ordered = sig.PlannedReplicas["l4"]
	require.Greater(t, ordered, int32(2), sig.Reason)
	an, sig = next(st, ordered, rate, 0, 0)
	assert.NotEqual(t, WhyCancel, an.Why, sig.Reason)
	assert.Equal(t, ordered, sig.PlannedReplicas["l4"], sig.Reason)
}

// A release gives back the variant whose requests miss the ITL target
// well beyond the error budget before the one whose requests meet it,
// whatever the lines say: on Azure code x3 the fitted L40S line matched
// the H100's, and the cheapest release dropped all twelve H100s while the
// L40S missed on 5.3% of its requests (12 L40S then saturated at a fifth
// of the rate their lines claimed).
func TestReleaseKeepsTheVariantMeetingITL(t *testing.T) {
	const rate = 4
	group := func(i int, l4Over float64) decision.Group {
		g := fleet(2, 4, rate)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		for j := range g.Replicas {
			// Too few requests each for a replica to count as over
			// its SLO (minOverSLORequests), enough together.
			g.Replicas[j].ArrivalRate = 0.1
			g.Replicas[j].TPOT = tpot(0.1, l4Over)
		}
		// The H100s were first seen serving 3 req/s each within the
		// target: a release may credit them with their line's rate.
		load := rate / 6.0
		if i < 4 {
			load = 3
		}
		for _, p := range []string{"h100-a", "h100-b", "h100-c", "h100-d"} {
			g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: p, Variant: "h100",
				NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
				ArrivalRate: load, AvgITLms: 20, AvgTTFTms: 200, TPOT: tpot(load, 0)})
		}
		return g
	}
	released := func(l4Over float64) (Analysis, decision.Signal, any) {
		var st any = seasoned()
		var an Analysis
		var sig decision.Signal
		// Past the found fleet's hold at a steady low rate: a release.
		for i := range 60 {
			an, sig, st = run(t, group(i, l4Over), st)
		}
		return an, sig, st
	}
	an, meeting, _ := released(0)
	require.Less(t, meeting.PlannedReplicas["h100"], int32(4), "with both variants meeting the target, H100s are given back: %s", meeting.Reason)
	assert.Empty(t, an.MissingITL)

	an, missing, st := released(0.1)
	assert.Equal(t, int32(4), missing.PlannedReplicas["h100"], "the H100s meet the target and stay: %s", missing.Reason)
	assert.Less(t, missing.PlannedReplicas["l4"], int32(2), "the L4s missing it go: %s", missing.Reason)
	assert.Equal(t, []string{"l4 (10.0% of its requests over the ITL target)"}, an.MissingITL, "the explain output says why")

	// A lull with too few requests to tell: the shares told within a
	// start-up delay (3 minutes) still hold, and no longer after it.
	quiet := func(i int) decision.Group {
		g := group(i, 0)
		for j := range g.Replicas {
			g.Replicas[j].TPOT = decision.Histogram{}
		}
		return g
	}
	var sig decision.Signal
	for i := 60; i < 62; i++ {
		_, sig, st = run(t, quiet(i), st)
		assert.Equal(t, int32(4), sig.PlannedReplicas["h100"], "cycle %d: %s", i, sig.Reason)
	}
	for i := 62; i < 68; i++ {
		_, sig, st = run(t, quiet(i), st)
	}
	assert.Less(t, sig.PlannedReplicas["h100"], int32(4), "a start-up delay after the last share told: %s", sig.Reason)
}

// A scale-down keeps the one replica of a variant whose rate is not yet
// proven (an H100 the gateway loads near idle beside six L4s, credited
// only the L4's price per request) for trialLength, then lets it go: at
// the fair price the two are tied, and releasing it first would leave the
// plan never learning what it serves.
func TestReleaseKeepsAVariantOnTrial(t *testing.T) {
	var st any = seasoned()
	plannedH100, plannedL4 := map[time.Duration]int32{}, map[time.Duration]int32{}
	for i := range 2*int(trialLength/time.Minute) + 2 {
		g := fleet(6, 1, 6)
		g.Now = t0.Add(time.Duration(i) * 30 * time.Second)
		g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: "h100-a", Variant: "h100",
			NumGPUBlocks: 32768, BlockSize: 16, AvgInputTokens: 800, AvgOutputTokens: 200,
			ArrivalRate: 0.2, AvgITLms: 20.2, AvgTTFTms: 200})
		var an Analysis
		var sig decision.Signal
		an, sig, st = run(t, g, st)
		require.Equal(t, "fair-price-prior", an.Variants[0].Capacity.Bound)
		plannedH100[g.Now.Sub(t0)] = sig.PlannedReplicas["h100"]
		plannedL4[g.Now.Sub(t0)] = sig.PlannedReplicas["l4"]
	}
	before, after := trialLength-time.Minute, trialLength+time.Minute
	assert.Less(t, plannedL4[before], int32(6), "the plan releases L4s")
	assert.Equal(t, int32(1), plannedH100[before], "kept while on trial")
	assert.Equal(t, int32(0), plannedH100[after], "released after its trial")
}
