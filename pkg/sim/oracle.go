package sim

import (
	"math"
	"runtime"
	"sync"
	"time"
)

// The oracle is an offline lower bound on what a policy that meets the SLO
// must pay. It is computed, not simulated:
//
//  1. The trace is cut into intervals (control.oracleInterval, 1 min). The
//     interval's demand is its arrival rate lambda = arrivals / length.
//  2. For every interval and variant, the capacity mu of ONE replica is
//     measured with the same server model: the interval's own requests
//     (padded with neighbouring intervals' up to minOracleSample) are
//     replayed into a single replica, evenly spaced, at increasing rates;
//     mu is the highest rate at which the replica still meets the SLO for
//     the attainment target (relative to what the requests can attain on
//     an idle replica), found by doubling then bisection.
//  3. The interval's plan is the cheapest integer mix n_v in
//     [minReplicas, maxReplicas] with sum(n_v * mu_v) >= lambda; its cost is
//     sum(cost_v * n_v) * length. The oracle's cost is the sum over
//     intervals.
//
// Why it is a lower bound on cost: it knows the future (no reaction time,
// no forecasting error), pays nothing for start-up (a replica serves the
// moment its interval starts, where real pods pay 2-7 minutes of model
// load), pays nothing for transitions (no draining, no hysteresis,
// stabilization windows or tolerance bands), and credits each replica with
// its capacity at the very edge of the SLO under evenly spaced arrivals,
// the friendliest arrival pattern there is (bursts within an interval
// only lower what a replica can take). A policy that meets the SLO in every
// interval has, in each, at least enough replicas to carry that interval's
// load, and it pays for them for longer. The bound is not exact in two
// ways: a policy may miss the SLO in one interval and make up for it
// elsewhere, or absorb a one-minute excess in the next minute (the oracle
// asks every interval to meet it; on a steady trace run at the edge this
// put the oracle ~5% above a fixed fleet, see TestOracleIsALowerBound), and
// a load balancer across many replicas can absorb variance a single
// replica cannot.
type OraclePlan struct {
	Interval time.Duration `json:"-"`
	// Replicas[i][v] is the plan for interval i and variant v.
	Replicas [][]int32 `json:"replicas"`
	// Capacity[i][v] is mu (requests/s one replica takes at the SLO edge).
	Capacity [][]float64 `json:"capacity"`
	Demand   []float64   `json:"demand"`
	Cost     float64     `json:"cost"`
	// Infeasible counts intervals where even maxReplicas of every variant
	// could not carry the demand (the plan then uses the maxima).
	Infeasible int `json:"infeasible"`
	// Peak is the plan of the costliest interval: static-peak's fleet.
	Peak []int32 `json:"peak"`
	// Warm is the fleet the autoscaling policies start with (initialFleet
	// "warm"): the cheapest mix for the highest demand before a first
	// scale-up could serve (start-up delay + engine interval + metrics
	// window), as if the fleet had been running and sized for the load.
	Warm []int32 `json:"warm"`
}

// minOracleSample is the least number of requests one capacity measurement
// replays; sparse intervals borrow from their neighbours.
const minOracleSample = 200

// maxOracleSample bounds the requests replayed per measurement (evenly
// subsampled), to keep the oracle fast.
const maxOracleSample = 300

// PlanOracle computes the oracle's plan for a trace.
func PlanOracle(sc *Scenario, trace *Trace) OraclePlan {
	interval := sc.Control.OracleInterval.D()
	end := costHorizon(trace, interval)
	n := int(end / interval)
	plan := OraclePlan{Interval: interval, Replicas: make([][]int32, n), Capacity: make([][]float64, n), Demand: make([]float64, n)}
	buckets := make([][]Request, n)
	for _, r := range trace.Requests {
		i := min(int(r.Arrival/interval), n-1)
		buckets[i] = append(buckets[i], r)
	}
	for i := range buckets {
		plan.Demand[i] = float64(len(buckets[i])) / interval.Seconds()
	}
	type job struct{ i, v int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for i := range n {
		plan.Capacity[i] = make([]float64, len(sc.Variants))
	}
	// A first estimate per variant on a sample of the whole trace brackets
	// every interval's search.
	hint := make([]float64, len(sc.Variants))
	whole := make([]Request, 0, maxOracleSample)
	for k := range min(maxOracleSample, len(trace.Requests)) {
		whole = append(whole, trace.Requests[k*len(trace.Requests)/min(maxOracleSample, len(trace.Requests))])
	}
	for v := range sc.Variants {
		hint[v] = measureCapacity(sc.Variants[v].Server, whole, sc.SLO, 0)
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				sample := oracleSample(buckets, j.i)
				plan.Capacity[j.i][j.v] = measureCapacity(sc.Variants[j.v].Server, sample, sc.SLO, hint[j.v])
			}
		}()
	}
	for i := range n {
		if len(buckets[i]) == 0 {
			continue
		}
		for v := range sc.Variants {
			jobs <- job{i, v}
		}
	}
	close(jobs)
	wg.Wait()
	var lead time.Duration
	for _, v := range sc.Variants {
		lead = max(lead, v.StartupDelay.D())
	}
	lead += sc.Control.EngineInterval.D() + sc.Control.MetricsWindow.D()
	warmAt := 0
	for i := 0; i < n && time.Duration(i)*interval < lead; i++ {
		if plan.Demand[i] > plan.Demand[warmAt] {
			warmAt = i
		}
	}
	plan.Warm, _ = cheapestMix(sc.Variants, plan.Capacity[warmAt], plan.Demand[warmAt])
	peakCost := -1.0
	for i := range n {
		mix, ok := cheapestMix(sc.Variants, plan.Capacity[i], plan.Demand[i])
		if !ok {
			plan.Infeasible++
		}
		plan.Replicas[i] = mix
		c := mixCost(sc.Variants, mix)
		plan.Cost += c * interval.Hours()
		if c > peakCost {
			peakCost, plan.Peak = c, mix
		}
	}
	return plan
}

// oracleSample is interval i's requests, widened to neighbouring intervals
// until there are minOracleSample, then evenly thinned to maxOracleSample.
func oracleSample(buckets [][]Request, i int) []Request {
	out := append([]Request(nil), buckets[i]...)
	for d := 1; len(out) < minOracleSample && (i-d >= 0 || i+d < len(buckets)); d++ {
		if i-d >= 0 {
			out = append(out, buckets[i-d]...)
		}
		if i+d < len(buckets) {
			out = append(out, buckets[i+d]...)
		}
	}
	if len(out) > maxOracleSample {
		thin := make([]Request, 0, maxOracleSample)
		for k := range maxOracleSample {
			thin = append(thin, out[k*len(out)/maxOracleSample])
		}
		out = thin
	}
	return out
}

func mixCost(variants []VariantSpec, mix []int32) float64 {
	var c float64
	for v, n := range mix {
		c += float64(n) * variants[v].Cost
	}
	return c
}

// cheapestMix enumerates integer mixes within the variants' bounds and
// returns the cheapest whose capacity covers demand (ties: fewer replicas,
// then the first found). ok is false when none does; the maxima are then
// returned.
func cheapestMix(variants []VariantSpec, capacity []float64, demand float64) ([]int32, bool) {
	nv := len(variants)
	best := make([]int32, nv)
	bestCost, bestCount := math.Inf(1), int32(math.MaxInt32)
	cur := make([]int32, nv)
	var rec func(v int, covered, cost float64, count int32)
	rec = func(v int, covered, cost float64, count int32) {
		if cost > bestCost+1e-9 {
			return
		}
		if v == nv {
			if covered+1e-9 >= demand && (cost < bestCost-1e-9 || (math.Abs(cost-bestCost) <= 1e-9 && count < bestCount)) {
				bestCost, bestCount = cost, count
				copy(best, cur)
			}
			return
		}
		spec := variants[v]
		for n := spec.MinReplicas; n <= spec.MaxReplicas; n++ {
			cur[v] = n
			rec(v+1, covered+float64(n)*capacity[v], cost+float64(n)*spec.Cost, count+n)
			if covered+float64(n)*capacity[v]+1e-9 >= demand {
				break // more of this variant only costs more
			}
		}
		cur[v] = 0
	}
	rec(0, 0, 0, 0)
	if math.IsInf(bestCost, 1) {
		for v, spec := range variants {
			best[v] = spec.MaxReplicas
		}
		return best, false
	}
	return best, true
}

// measureCapacity is mu: the highest arrival rate (requests/s) at which one
// replica meets the SLO for the attainment target on these requests, replayed
// evenly spaced, to within 2%. The target is relative to the attainment on
// an idle replica, so requests no replica could serve in time do not make
// the variant useless. A positive hint brackets the search.
func measureCapacity(spec ServerSpec, reqs []Request, slo SLO, hint float64) float64 {
	if len(reqs) == 0 {
		return 0
	}
	idle := replayAttainment(spec, reqs, 0, slo)
	if idle == 0 {
		return 0
	}
	need := slo.Attainment * idle
	ok := func(rate float64) bool { return replayAttainment(spec, reqs, rate, slo) >= need-1e-12 }
	lo, hi := 0.0, 0.25
	if hint > 0 {
		lo, hi = 0.7*hint, 1.3*hint
		for lo > 1e-3 && !ok(lo) {
			lo, hi = lo/2, lo
		}
	}
	for ok(hi) {
		lo, hi = hi, hi*2
		if hi > 1e5 {
			return hi
		}
	}
	for hi-lo > 0.02*hi {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// replayAttainment replays reqs into one replica evenly spaced at rate
// (rate 0: each request alone) and returns the fraction meeting the SLO.
func replayAttainment(spec ServerSpec, reqs []Request, rate float64, slo SLO) float64 {
	srv := newServer(spec)
	seqs := make([]seq, len(reqs))
	gap := time.Duration(0)
	if rate > 0 {
		gap = time.Duration(float64(time.Second) / rate)
	}
	var now time.Duration
	next, met, pending := 0, 0, 0
	var done []*seq
	ttftMax, itlMax := slo.TTFT.D(), slo.ITL.D()
	for next < len(reqs) || pending > 0 {
		arrival := never
		if next < len(reqs) {
			arrival = time.Duration(next) * gap
			if rate == 0 {
				arrival = now // each request alone: the next arrives when the replica is idle
				if pending > 0 {
					arrival = never
				}
			}
		}
		if srv.busy && srv.stepEnd <= arrival {
			now = srv.stepEnd
			srv.busy = false
			done = srv.complete(now, done[:0])
			for _, q := range done {
				pending--
				ttft := q.firstToken - q.arrival
				itl := time.Duration(0)
				if q.output > 1 {
					itl = (now - q.firstToken) / time.Duration(q.output-1)
				}
				if ttft <= ttftMax && itl <= itlMax {
					met++
				}
			}
		} else if arrival != never {
			now = arrival
			r := reqs[next]
			q := &seqs[next]
			*q = seq{req: int32(next), arrival: now, input: max(r.Input, 1), output: max(r.Output, 1), firstToken: -1}
			q.prompt = q.input
			next++
			if !srv.fits(q.input, q.output) {
				continue
			}
			pending++
			srv.enqueue(q)
		} else if !srv.busy {
			break
		}
		if !srv.busy {
			if d, ok := srv.schedule(); ok {
				srv.busy, srv.stepEnd = true, now+d
			}
		}
		if rate > 0 && now > time.Duration(len(reqs))*gap+10*time.Minute {
			break // hopelessly overloaded: what is left misses
		}
	}
	return float64(met) / float64(len(reqs))
}
