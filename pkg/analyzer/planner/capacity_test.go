package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
