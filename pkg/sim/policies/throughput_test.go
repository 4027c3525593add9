package policies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

func obsLine(a, b float64, ks ...float64) []itlObs {
	var out []itlObs
	for _, k := range ks {
		out = append(out, itlObs{k: k, itl: a*k + b})
	}
	return out
}

// TestITLWindow: only observable k and positive ITL enter, the oldest go
// beyond 20 or 30 minutes, and a fit needs 10 spanning 0.30 of k.
func TestITLWindow(t *testing.T) {
	var w itlWindow
	for _, o := range []itlObs{{k: 0.1, itl: 0.02}, {k: 0.9, itl: 0.05}, {k: 0.5, itl: 0}, {k: 0.5, itl: 0.03}} {
		w.add(o)
	}
	require.Len(t, w.obs, 1, "k below 0.15, above 0.85 and ITL 0 are dropped")
	for i := range 24 {
		w.add(itlObs{k: 0.2 + 0.01*float64(i), itl: 0.03, at: time.Duration(i) * time.Minute})
	}
	require.Len(t, w.obs, tpWindowMaxSize)
	assert.Equal(t, 4*time.Minute, w.obs[0].at, "the oldest are evicted")
	assert.False(t, w.ready(), "spread 0.19 < 0.30")
	w.add(itlObs{k: 0.6, itl: 0.04, at: 24 * time.Minute})
	assert.True(t, w.ready())
	w.prune(40 * time.Minute)
	assert.Equal(t, 10*time.Minute, w.obs[0].at, "older than 30 minutes pruned")
	w.prune(60 * time.Minute)
	assert.False(t, w.ready(), "too few left")
}

// TestFitITL: least squares over a ready window, B pinned otherwise.
func TestFitITL(t *testing.T) {
	ks := []float64{0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8}
	for _, tt := range []struct {
		name     string
		window   []itlObs
		current  []itlObs
		pinned   float64
		want     itlFit
		wantOLS  bool
		wantNone bool
	}{
		{name: "ready window: least squares", window: obsLine(0.05, 0.02, ks...), current: obsLine(0.05, 0.02, 0.5),
			pinned: tpBaselineITL, want: itlFit{A: 0.05, B: 0.02}, wantOLS: true},
		{name: "short window: B pinned at the baseline over this cycle's points",
			window: obsLine(0.05, 0.02, 0.3, 0.5), current: []itlObs{{k: 0.5, itl: 0.031}},
			pinned: tpBaselineITL, want: itlFit{A: 0.05, B: tpBaselineITL}},
		{name: "short window: B pinned at the last fitted B",
			current: []itlObs{{k: 0.25, itl: 0.03}, {k: 0.5, itl: 0.04}}, pinned: 0.02, want: itlFit{A: 0.04, B: 0.02}},
		{name: "ten points but spread 0.25: pinned", window: obsLine(0.05, 0.02, 0.2, 0.22, 0.25, 0.27, 0.3, 0.32, 0.35, 0.4, 0.42, 0.45),
			current: []itlObs{{k: 0.5, itl: 0.031}}, pinned: tpBaselineITL, want: itlFit{A: 0.05, B: tpBaselineITL}},
		{name: "falling slope from the window: pinned instead", window: obsLine(-0.01, 0.05, ks...),
			current: []itlObs{{k: 0.5, itl: 0.031}}, pinned: tpBaselineITL, want: itlFit{A: 0.05, B: tpBaselineITL}},
		{name: "pinned slope below zero is flat", current: []itlObs{{k: 0.5, itl: 0.004}}, pinned: tpBaselineITL,
			want: itlFit{A: 0, B: tpBaselineITL}},
		{name: "no points, short window: no model", window: obsLine(0.05, 0.02, 0.3), pinned: tpBaselineITL, wantNone: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := itlWindow{obs: tt.window}
			got, ols, ok := fitITL(&w, tt.current, tt.pinned)
			if tt.wantNone {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantOLS, ols)
			assert.InDelta(t, tt.want.A, got.A, 1e-9)
			assert.InDelta(t, tt.want.B, got.B, 1e-9)
		})
	}
}

// TestThroughputDecide: two variants whose per-replica supply at k_sat is
// round: cheap = 0.85 x 10000 / 1000 / 0.085 = 100 tokens/s for cost 8
// (0.08 per token/s), big = 0.85 x 30000 / 1000 / 0.051 = 500 tokens/s
// for cost 20 (0.04 per token/s: the cheaper per unit of supply).
func TestThroughputDecide(t *testing.T) {
	cheap := tpVariant{Cost: 8, Min: 1, Max: 20, KVMax: 10000, KVPerRequest: 1000, Fit: itlFit{A: 0.1, B: 0}, HasFit: true}
	big := tpVariant{Cost: 20, Min: 0, Max: 10, KVMax: 30000, KVPerRequest: 1000, Fit: itlFit{A: 0.06, B: 0}, HasFit: true}
	with := func(v tpVariant, ready, pending int32) tpVariant { v.Ready, v.Pending = ready, pending; return v }
	require.InDelta(t, 100, cheap.perReplicaSupply(), 1e-9)
	require.InDelta(t, 500, big.perReplicaSupply(), 1e-9)
	for _, tt := range []struct {
		name    string
		in      tpInput
		want    []int32
		demand  float64
		abstain bool
	}{
		{name: "demand over 0.85 of supply: the cheapest per token/s grows",
			// D = 5 x 200 = 1000; RC = 1000/0.85 - 700 = 476 -> 1 big.
			in:   tpInput{Variants: []tpVariant{with(cheap, 2, 0), with(big, 1, 0)}, ArrivalRate: 5, OutputTokens: 200},
			want: []int32{2, 2}, demand: 1000},
		{name: "pending replicas count in anticipated supply",
			in:   tpInput{Variants: []tpVariant{with(cheap, 2, 0), with(big, 1, 1)}, ArrivalRate: 5, OutputTokens: 200},
			want: []int32{2, 2}, demand: 1000},
		{name: "the cheapest at its max: the next takes the rest",
			// RC 476 -> ceil(4.76) = 5 cheap.
			in: tpInput{Variants: []tpVariant{with(cheap, 2, 0), func() tpVariant { v := with(big, 1, 0); v.Max = 1; return v }()},
				ArrivalRate: 5, OutputTokens: 200},
			want: []int32{7, 1}, demand: 1000},
		{name: "engine completions stand in for a missing EPP rate",
			in:   tpInput{Variants: []tpVariant{with(cheap, 2, 0), with(big, 1, 0)}, CompletionRate: 5, OutputTokens: 200},
			want: []int32{2, 2}, demand: 1000},
		{name: "within the band: hold",
			// D = 500: 500/0.85 = 588 <= 700 and 700 - 500/0.7 < 0.
			in:   tpInput{Variants: []tpVariant{with(cheap, 2, 0), with(big, 1, 0)}, ArrivalRate: 2.5, OutputTokens: 200},
			want: []int32{2, 1}, demand: 500},
		{name: "the EPP queue tips it: 20 / (2 x mean ITL(k_sat) 0.068)",
			in:   tpInput{Variants: []tpVariant{with(cheap, 2, 0), with(big, 1, 0)}, ArrivalRate: 2.5, OutputTokens: 200, QueueSize: 20},
			want: []int32{2, 2}, demand: 500 + 20/(2*0.068)},
		{name: "spare supply: the most expensive per token/s goes first, floor, down to min",
			// D = 400; SC = 1400 - 571 = 829: cheap 4 -> 1 (min), SC 529 -> big 2 -> 1.
			in:   tpInput{Variants: []tpVariant{with(cheap, 4, 0), with(big, 2, 0)}, ArrivalRate: 2, OutputTokens: 200},
			want: []int32{1, 1}, demand: 400},
		{name: "no demand: every variant to its min",
			in:   tpInput{Variants: []tpVariant{with(cheap, 3, 0), with(big, 2, 0)}, OutputTokens: 200},
			want: []int32{1, 0}},
		{name: "a variant without a model supplies nothing and is not chosen",
			// Supply 500 (big alone); D = 1000: RC = 676 -> 2 big.
			in: tpInput{Variants: []tpVariant{func() tpVariant { v := with(cheap, 2, 0); v.HasFit = false; return v }(), with(big, 1, 0)},
				ArrivalRate: 5, OutputTokens: 200},
			want: []int32{2, 3}, demand: 1000},
		{name: "no model anywhere: abstain",
			in: tpInput{Variants: []tpVariant{{Cost: 8, Min: 1, Max: 4, Ready: 2}}, ArrivalRate: 5, OutputTokens: 200}, abstain: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := throughputDecide(tt.in)
			if tt.abstain {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.want, d.Targets)
			assert.InDelta(t, tt.demand, d.Demand, 1e-6)
		})
	}
}

// TestCombineTargets: max per variant for scale-up, unanimity for
// scale-down; an abstaining throughput analyzer leaves saturation's.
func TestCombineTargets(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sat, tp []int32
		tpOK    bool
		want    []int32
	}{
		{name: "either scales up", sat: []int32{3, 1}, tp: []int32{2, 2}, tpOK: true, want: []int32{3, 2}},
		{name: "down only when both are down", sat: []int32{3, 2}, tp: []int32{1, 1}, tpOK: true, want: []int32{3, 2}},
		{name: "both down: the smaller step", sat: []int32{2, 1}, tp: []int32{1, 1}, tpOK: true, want: []int32{2, 1}},
		{name: "throughput abstains", sat: []int32{2, 1}, tp: nil, tpOK: false, want: []int32{2, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, combineTargets(tt.sat, tt.tp, tt.tpOK))
		})
	}
}

// TestThroughputPolicyScalesUpUnderSpike: on the spike (6 -> 27 req/s at
// minute 10 for 5 minutes) the combined policy holds more replicas in the
// spike's first minutes than before it, and fits an ITL model.
func TestThroughputPolicyScalesUpUnderSpike(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 30*time.Minute, 6, 27)
	p := &throughputPolicy{v1Policy: v1Policy{cfg: sc.Policies.V1}}
	f := fleet.New(&sc, &tr, p, []int32{1, 0})
	f.Run()
	before, during := peakAround(f.Summarize().Timeline, 10*time.Minute, 3*time.Minute)
	t.Logf("replicas: at most %d before the spike, %d in its first 3 minutes", before, during)
	assert.Greater(t, during, before)
	assert.True(t, p.variants[0].hasShape)
	assert.NotEmpty(t, p.variants[0].window.obs, "observations in the window")
	s := f.Summarize()
	assert.Zero(t, s.Unfinished)
}
