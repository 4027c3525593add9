package oracle

import (
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// The oracle is an offline plan, with perfect foresight, that meets the SLO
// when replayed (MakeFeasible), and the per-interval lower bound on what a
// policy that meets the SLO must pay that it starts from (NewPlan). The
// bound is computed by search:
//
//  1. The trace is cut into intervals (control.oracleInterval, 1 min).
//  2. For every interval, each candidate fleet (an integer mix n_v in
//     [minReplicas, maxReplicas]) is tested by replaying the interval's own
//     requests, at their real arrival times, through a fleet of that mix
//     with the same server model and router, every replica Ready from the
//     first second and empty at the interval's start. The mix passes when
//     the requests meeting the SLO are at least the attainment target times
//     those that would meet it alone on an idle replica, rounded down
//     (requests no replica could serve in time do not make the SLO
//     unreachable, and a sparse interval may still miss one request).
//  3. The interval's plan is the cheapest passing mix (ties: fewer
//     replicas), found per count of the other variants by a gallop and a
//     bisection on the first variant's count (cheapestMix: more of a
//     slower variant can serve worse). Its cost is sum(cost_v * n_v) *
//     length; the oracle's cost is the sum over intervals.
//
// Why it is a lower bound on cost: it knows the future (no reaction time,
// no forecasting error), pays nothing for start-up (a replica serves the
// moment its interval starts, where real pods pay 2-7 minutes of model
// load), pays nothing for transitions (no draining, no hysteresis,
// stabilization windows or tolerance bands), starts every interval with
// no backlog from the previous one, and takes the cheapest fleet that
// passes, at the very edge of the SLO. A policy that meets the SLO in every
// interval has, in each, at least a passing fleet, and it pays for it for
// longer. The bound is not exact in one way: a policy may miss the SLO in
// one interval and make up for it elsewhere, or absorb a one-minute excess
// in the next minute (the oracle asks every interval to meet it; see
// TestOracleIsALowerBound). Nor is the search exhaustive where more
// replicas serve worse: a run of passing counts shorter than the gallop's
// step is skipped.
//
// The search replays the requests rather than credit each replica with the
// rate it takes at the SLO edge under evenly spaced arrivals: that rate is
// not a bound on bursty traffic (on the Azure code trace, with sub-second
// bursts of up to 67 long prompts, a plan sized by it meets the SLO for 47%
// of requests when replayed).
type Plan struct {
	Interval time.Duration `json:"-"`
	// Replicas[i][v] is the plan for interval i and variant v.
	Replicas [][]int32 `json:"replicas"`
	// Demand[i] is interval i's arrival rate (requests/s).
	Demand []float64 `json:"demand"`
	Cost   float64   `json:"cost"`
	// StartupCost is a tighter bound for policies that pay for replicas
	// while they load the model (as every simulated policy does): a replica
	// that serves in interval j exists, and is paid for, from at least the
	// shortest start-up delay before, so interval i costs at least the
	// costliest plan of the intervals it precedes by up to that delay.
	StartupCost float64 `json:"startupCost"`
	// Replays counts the fleet replays the search ran.
	Replays int `json:"replays"`
	// Infeasible counts intervals where even maxReplicas of every variant
	// did not meet the SLO (the plan then uses the maxima).
	Infeasible int `json:"infeasible"`
	// Peak is the plan of the costliest interval: static-peak's fleet.
	Peak []int32 `json:"peak"`
	// Warm is the fleet the autoscaling policies start with (initialFleet
	// "warm"): the costliest plan among the intervals the run plays before
	// a first scale-up could serve (start-up delay + engine interval +
	// metrics window, warmWindow), as if the fleet had been running and
	// sized for the load.
	Warm []int32 `json:"warm"`

	// Bound is the per-interval plan (each interval tested from an empty
	// fleet) and LowerBound its cost. Peak, Warm and StartupCost derive
	// from it. Until MakeFeasible runs, Replicas and Cost are the same.
	Bound      [][]int32 `json:"bound"`
	LowerBound float64   `json:"lowerBound"`
	// Feasible says Replicas is the plan MakeFeasible made; Attainment is
	// its replay's SLO attainment and Repairs the replays it took.
	Feasible   bool    `json:"feasible"`
	Attainment float64 `json:"attainment"`
	Repairs    int     `json:"repairs"`

	buckets []trace.Trace
	// infeasibleAt marks the intervals Infeasible counts, each once however
	// many searches fail on it.
	infeasibleAt []bool
}

// warmWindow is the part of a trace of length end that a run plays
// first, for lead: with a mirrored warm-up of d, the trace's lead before d
// backwards (then, if lead is longer, the measured run's start); without
// one, or replayed forwards, the trace's start. A fleet sized for the
// trace's start would meet a mirrored warm-up's first minutes, played
// from d, with a queue the size of the difference: the diurnal hour
// starts at 6-7 req/s and runs 10-11 in its 10th minute, and a bursty
// hour's 10th minute may be in a burst.
func warmWindow(c scenario.Control, lead, end time.Duration) (from, to time.Duration) {
	d := min(c.Warmup.D(), end)
	if c.WarmupMode != scenario.WarmupMirror || d <= 0 {
		return 0, lead
	}
	if d >= lead {
		return d - lead, d
	}
	return 0, max(d, lead-d)
}

// NewPlan computes the oracle's plan for a trace.
func NewPlan(sc *scenario.Scenario, tr *trace.Trace) Plan {
	interval := sc.Control.OracleInterval.D()
	end := fleet.CostHorizon(tr, interval)
	n := int(end / interval)
	plan := Plan{Interval: interval, Replicas: make([][]int32, n), Demand: make([]float64, n)}
	buckets := make([]trace.Trace, n)
	for _, r := range tr.Requests {
		i := min(int(r.Arrival/interval), n-1)
		r.Arrival -= time.Duration(i) * interval
		buckets[i].Requests = append(buckets[i].Requests, r)
	}
	infeasible := make([]bool, n)
	replays := make([]int, n)
	for i := range n {
		plan.Demand[i] = float64(len(buckets[i].Requests)) / interval.Seconds()
	}
	fleet.Parallel(n, func(i int) {
		plan.Replicas[i], infeasible[i], replays[i] = planInterval(sc, &buckets[i])
	})
	plan.buckets = buckets
	plan.infeasibleAt = infeasible
	var lead time.Duration
	for _, v := range sc.Variants {
		lead = max(lead, v.StartupDelay.D())
	}
	lead += sc.Control.EngineInterval.D() + sc.Control.MetricsWindow.D()
	peakCost, warmCost := -1.0, -1.0
	warmFrom, warmTo := warmWindow(sc.Control, lead, end)
	shortest := sc.Variants[0].StartupDelay.D()
	for _, v := range sc.Variants {
		shortest = min(shortest, v.StartupDelay.D())
	}
	ahead := int(shortest / interval)
	for i := range n {
		if infeasible[i] {
			plan.Infeasible++
		}
		plan.Replays += replays[i]
		c := MixCost(sc.Variants, plan.Replicas[i])
		plan.Cost += c * interval.Hours()
		held := c
		for j := i + 1; j <= min(n-1, i+ahead); j++ {
			held = max(held, MixCost(sc.Variants, plan.Replicas[j]))
		}
		plan.StartupCost += held * interval.Hours()
		if c > peakCost {
			peakCost, plan.Peak = c, plan.Replicas[i]
		}
		if at := time.Duration(i) * interval; at < warmTo && at+interval > warmFrom && c > warmCost {
			warmCost, plan.Warm = c, plan.Replicas[i]
		}
	}
	plan.LowerBound = plan.Cost
	plan.Bound = make([][]int32, n)
	for i, mix := range plan.Replicas {
		plan.Bound[i] = slices.Clone(mix)
	}
	return plan
}

// planInterval is the cheapest mix whose replay of reqs (arrivals relative
// to the interval's start) meets the SLO; infeasible when even the maxima
// do not (the maxima are then returned).
func planInterval(sc *scenario.Scenario, reqs *trace.Trace) (mix []int32, infeasible bool, replays int) {
	if len(reqs.Requests) == 0 {
		mix, _ = cheapestMix(sc.Variants, func([]int32) bool { return true })
		return mix, false, 0
	}
	var alone int
	for _, v := range sc.Variants {
		alone = max(alone, fleet.IdleMet(v.Server, reqs.Requests, sc.SLO))
	}
	// Rounded down: every interval may miss at least one request, so the
	// per-interval test is no stricter than the whole run's where requests
	// are few.
	need := math.Floor(sc.SLO.Attainment*float64(alone) + 1e-9)
	passes := func(mix []int32) bool {
		replays++
		f := fleet.New(sc, reqs, policies.Static{}, mix)
		f.Run()
		met := f.MetCount()
		return float64(met) >= need-1e-9
	}
	mix, ok := cheapestMix(sc.Variants, passes)
	return mix, !ok, replays
}

func MixCost(variants []scenario.VariantSpec, mix []int32) float64 {
	var c float64
	for v, n := range mix {
		c += float64(n) * variants[v].Cost
	}
	return c
}

// cheapestMix returns the cheapest mix within the variants' bounds that
// passes (ties: fewer replicas, then the first found). For every count of
// the other variants it searches the first variant's count, only below
// the best cost found so far: it gallops up from the fewest (lo, lo+1,
// lo+3, lo+7, ...) to the first count that passes, then bisects the gap
// below it. passes need not be monotone: a replica of a slower variant
// can fail a mix that passed (the router sends it long prompts it
// prefills past the TTFT target: the reasoning half day's first minute
// at half its rate passes with one L40S and one H100 and fails with 24
// and 12), so the search never concludes from the most replicas failing
// that none pass; within the gap it bisects as if passes were monotone.
// ok is false when no mix passes; the maxima are then returned.
func cheapestMix(variants []scenario.VariantSpec, passes func(mix []int32) bool) ([]int32, bool) {
	nv := len(variants)
	best := make([]int32, nv)
	bestCost, bestCount := math.Inf(1), int32(math.MaxInt32)
	cur := make([]int32, nv)
	first := variants[0]
	consider := func(cost float64, count int32) {
		if cost < bestCost-1e-9 || (math.Abs(cost-bestCost) <= 1e-9 && count < bestCount) {
			bestCost, bestCount = cost, count
			copy(best, cur)
		}
	}
	var rec func(v int, cost float64, count int32)
	rec = func(v int, cost float64, count int32) {
		if cost > bestCost+1e-9 {
			return
		}
		if v < nv {
			for n := variants[v].MinReplicas; n <= variants[v].MaxReplicas; n++ {
				cur[v] = n
				rec(v+1, cost+float64(n)*variants[v].Cost, count+n)
			}
			cur[v] = 0
			return
		}
		// The first variant: the most that can still tie the best cost...
		lo, hi := first.MinReplicas, first.MaxReplicas
		if first.Cost > 0 && !math.IsInf(bestCost, 1) {
			hi = min(hi, int32(math.Floor((bestCost-cost)/first.Cost+1e-9)))
		}
		if hi < lo {
			return
		}
		// ...galloping up from the fewest to one that passes...
		failed, at := lo-1, lo
		for step := int32(1); ; step *= 2 {
			cur[0] = at
			if passes(cur) {
				break
			}
			if at == hi {
				return
			}
			failed, at = at, min(hi, lo+2*step-1)
		}
		// ...then the fewest above the last that failed.
		lo, hi = failed+1, at
		for lo < hi {
			mid := lo + (hi-lo)/2
			cur[0] = mid
			if passes(cur) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		cur[0] = hi
		consider(cost+float64(hi)*first.Cost, count+hi)
	}
	rec(1, 0, 0)
	if math.IsInf(bestCost, 1) {
		for v, spec := range variants {
			best[v] = spec.MaxReplicas
		}
		return best, false
	}
	return best, true
}

// maxRepairs bounds MakeFeasible's replays of the whole plan.
const maxRepairs = 12

// MakeFeasible turns the per-interval plan into one that meets the SLO when
// replayed: the per-interval test starts every interval empty, so the
// requests still in flight or queued when the previous interval's fleet
// hands over (and the pods it removes while they drain) are ignored, and
// every interval sits at the very edge of the target. Replayed, such a plan
// misses the attainment target on most workloads.
//
//  1. Carry the backlog forward: interval i is tested from the state the
//     chosen plan of interval i-1 leaves (interval i-1 replayed, from
//     empty, before i, its requests not counted). The per-interval plan of
//     i, which passes from empty, is tried first; when it fails, the
//     cheapest mix at least as costly that passes is searched. Intervals
//     are chosen in order; the tests of the per-interval plans' own
//     hand-overs run in parallel beforehand.
//  2. Replay the whole plan as the oracle policy does. While it misses the
//     attainment target, give the intervals with the most requests over
//     their share of misses the next costlier mix that passes step 1's
//     test, and replay again (at most maxRepairs replays).
func (plan *Plan) MakeFeasible(sc *scenario.Scenario, tr *trace.Trace) {
	if plan.Feasible || len(plan.Replicas) == 0 {
		return
	}
	fz := newFeasibility(plan, sc)
	fz.carryBacklog()
	fz.repair(tr)
	plan.Cost = 0
	for _, mix := range plan.Replicas {
		plan.Cost += MixCost(sc.Variants, mix) * plan.Interval.Hours()
	}
	plan.Feasible = true
}

// feasibility is what MakeFeasible's tests share: the scenario plans are
// replayed with and each interval's need (the requests that must meet the
// SLO).
type feasibility struct {
	plan   *Plan
	sc     *scenario.Scenario
	replay scenario.Scenario
	need   []float64
}

// newFeasibility computes each interval's need as the per-interval test
// does: the attainment target times the requests that meet the SLO alone
// on an idle replica, rounded down.
func newFeasibility(plan *Plan, sc *scenario.Scenario) *feasibility {
	n := len(plan.Replicas)
	fz := &feasibility{plan: plan, sc: sc, replay: ReplayScenario(sc), need: make([]float64, n)}
	for i := range n {
		var alone int
		for _, v := range sc.Variants {
			alone = max(alone, fleet.IdleMet(v.Server, plan.buckets[i].Requests, sc.SLO))
		}
		fz.need[i] = math.Floor(sc.SLO.Attainment*float64(alone) + 1e-9)
	}
	return fz
}

// carried reports whether mix meets interval i's need after prev held
// interval i-1.
func (fz *feasibility) carried(i int, prev, mix []int32) bool {
	plan := fz.plan
	if len(plan.buckets[i].Requests) == 0 {
		return true
	}
	plan.Replays++
	if i == 0 {
		// The replay starts empty.
		return handOver(&fz.replay, plan.Interval, &trace.Trace{}, &plan.buckets[0], mix, mix) >= fz.need[0]-1e-9
	}
	return handOver(&fz.replay, plan.Interval, &plan.buckets[i-1], &plan.buckets[i], prev, mix) >= fz.need[i]-1e-9
}

// search is the cheapest mix costing more than floor (at least floor when
// strict is false) that passes after prev.
func (fz *feasibility) search(i int, prev []int32, floor float64, strict bool) []int32 {
	plan, variants := fz.plan, fz.sc.Variants
	mix, found := cheapestMix(variants, func(mix []int32) bool {
		c := MixCost(variants, mix)
		if c < floor-1e-9 || (strict && c <= floor+1e-9) {
			return false
		}
		return fz.carried(i, prev, mix)
	})
	if !found && !plan.infeasibleAt[i] {
		plan.infeasibleAt[i] = true
		plan.Infeasible++
	}
	return mix
}

// boundHandOversPass tests, in parallel, whether each per-interval plan
// meets its interval's need after the previous per-interval plan.
func (fz *feasibility) boundHandOversPass() []bool {
	plan := fz.plan
	n := len(plan.Replicas)
	ok := make([]bool, n)
	var replays atomicCounter
	fleet.Parallel(n, func(i int) {
		if i == 0 || len(plan.buckets[i].Requests) == 0 {
			ok[i] = true
			return
		}
		replays.add(1)
		ok[i] = handOver(&fz.replay, plan.Interval, &plan.buckets[i-1], &plan.buckets[i], plan.Bound[i-1], plan.Bound[i]) >= fz.need[i]-1e-9
	})
	plan.Replays += replays.load()
	return ok
}

// carryBacklog is MakeFeasible's step 1: in order, each interval keeps its
// per-interval plan when that passes after the chosen plan of the interval
// before, else takes the cheapest mix at least as costly that does.
func (fz *feasibility) carryBacklog() {
	plan := fz.plan
	ok := fz.boundHandOversPass()
	for i := 1; i < len(plan.Replicas); i++ {
		if ok[i] && slices.Equal(plan.Replicas[i-1], plan.Bound[i-1]) {
			continue
		}
		if !ok[i] || !fz.carried(i, plan.Replicas[i-1], plan.Bound[i]) {
			plan.Replicas[i] = fz.search(i, plan.Replicas[i-1], MixCost(fz.sc.Variants, plan.Bound[i]), false)
		}
	}
}

// repair is MakeFeasible's step 2: replay the whole plan and, while it
// misses the attainment target, raise the intervals furthest over their
// share of misses (at most maxRepairs replays).
func (fz *feasibility) repair(tr *trace.Trace) {
	plan := fz.plan
	total := len(tr.Requests)
	allowed := (1 - fz.sc.SLO.Attainment) * float64(total)
	for plan.Repairs = 1; ; plan.Repairs++ {
		missed, met := fz.replayMisses(tr)
		if total > 0 {
			plan.Attainment = float64(met) / float64(total)
		}
		excess := float64(total-met) - allowed
		if excess <= 1e-9 || plan.Repairs >= maxRepairs {
			break
		}
		fz.raiseWorst(missed, excess)
	}
}

// replayMisses replays the whole plan and counts the requests that meet
// the SLO, and per interval those that miss it.
func (fz *feasibility) replayMisses(tr *trace.Trace) (missed []int, met int) {
	plan := fz.plan
	n := len(plan.Replicas)
	f := NewPlanFleet(fz.sc, tr, plan.Replicas, plan.Interval)
	f.Run()
	missed = make([]int, n)
	for k, r := range tr.Requests {
		if f.Met(k) {
			met++
			continue
		}
		missed[min(int(r.Arrival/plan.Interval), n-1)]++
	}
	return missed, met
}

// raiseWorst gives the intervals furthest over their share of misses the
// next costlier mix that passes after the interval before, until their
// misses cover the excess.
func (fz *feasibility) raiseWorst(missed []int, excess float64) {
	plan := fz.plan
	order := make([]int, 0, len(missed))
	for i := range missed {
		if missed[i] > 0 {
			order = append(order, i)
		}
	}
	over := func(i int) float64 {
		return float64(missed[i]) - (1-fz.sc.SLO.Attainment)*float64(len(plan.buckets[i].Requests))
	}
	sort.SliceStable(order, func(a, b int) bool { return over(order[a]) > over(order[b]) })
	covered := 0.0
	for _, i := range order {
		if covered >= excess {
			break
		}
		covered += float64(missed[i])
		var prev []int32
		if i > 0 {
			prev = plan.Replicas[i-1]
		}
		plan.Replicas[i] = fz.search(i, prev, MixCost(fz.sc.Variants, plan.Replicas[i]), true)
	}
}

// ReplayScenario is the scenario the plan is replayed with: replicas serve
// the moment the plan asks for them.
func ReplayScenario(sc *scenario.Scenario) scenario.Scenario {
	scn := *sc
	scn.Variants = slices.Clone(sc.Variants)
	for v := range scn.Variants {
		scn.Variants[v].StartupDelay = 0
	}
	scn.Control.EngineInterval = sc.Control.OracleInterval
	return scn
}

// NewPlanFleet is the fleet that replays a plan: replicas change at
// interval starts and serve at once.
func NewPlanFleet(sc *scenario.Scenario, trace *trace.Trace, replicas [][]int32, interval time.Duration) *fleet.Fleet {
	scn := ReplayScenario(sc)
	initial := make([]int32, len(sc.Variants))
	if len(replicas) > 0 {
		copy(initial, replicas[0])
	}
	f := fleet.New(&scn, trace, &replayPolicy{plan: &Plan{Interval: interval, Replicas: replicas}}, initial)
	f.SetControlStart(0)
	return f
}

// handOver replays interval prevReqs with fleet prev from empty, then
// interval reqs with mix (arrivals of both relative to their own interval's
// start), and counts reqs' requests that meet the SLO.
func handOver(scn *scenario.Scenario, interval time.Duration, prevReqs, reqs *trace.Trace, prev, mix []int32) float64 {
	tr := &trace.Trace{Requests: make([]trace.Request, 0, len(prevReqs.Requests)+len(reqs.Requests))}
	tr.Requests = append(tr.Requests, prevReqs.Requests...)
	for _, r := range reqs.Requests {
		r.Arrival += interval
		tr.Requests = append(tr.Requests, r)
	}
	f := fleet.NewWarm(scn, tr, &replayPolicy{plan: &Plan{Interval: interval, Replicas: [][]int32{prev, mix}}}, prev,
		fleet.Warmup{Origin: interval, Skip: len(prevReqs.Requests)})
	f.SetControlStart(0)
	f.Run()
	return float64(f.MetCount())
}

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) add(d int) { c.n.Add(int64(d)) }
func (c *atomicCounter) load() int { return int(c.n.Load()) }

// replayPolicy sets the oracle's plan at every interval start.
type replayPolicy struct {
	plan *Plan
	at   int
}

func (p *replayPolicy) Start(*fleet.Fleet)                                {}
func (p *replayPolicy) HPA(*fleet.Fleet, int) *fleet.HPA                  { return nil }
func (p *replayPolicy) Metric(*fleet.Fleet, int) (float64, float64, bool) { return 0, 0, false }
func (p *replayPolicy) ScaleFromZero(*fleet.Fleet)                        {}
func (p *replayPolicy) Engine(f *fleet.Fleet) {
	i := int(f.Now() / p.plan.Interval)
	if i >= len(p.plan.Replicas) || i == p.at {
		return
	}
	p.at = i
	for v, n := range p.plan.Replicas[i] {
		f.SetReplicas(v, n)
	}
}

// NewReplay is the policy that replays the plan: it sets the plan's fleet
// at every interval start.
func NewReplay(plan *Plan) fleet.Policy { return &replayPolicy{plan: plan} }
