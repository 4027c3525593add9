package fleet

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// Epoch is the wall-clock time of simulated time 0, handed to the decision
// pipeline (which reads no clock of its own).
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// drainLimit bounds how long the simulation runs past the end of the trace
// to let requests in flight finish; what is left then misses the SLO.
const drainLimit = 15 * time.Minute

const never = time.Duration(math.MaxInt64)

// Pod is one replica of a variant: Pending (loading the model) until
// readyAt, then Ready and routable, then Terminating (draining) once
// deleted, then gone.
type Pod struct {
	id          int
	name        string
	variant     int
	created     time.Duration
	readyAt     time.Duration
	ready       bool
	terminating bool
	deadline    time.Duration // end of the termination grace period
	gone        bool
	goneAt      time.Duration
	srv         *server
	prom        series
	heapIndex   int
}

type variantState struct {
	spec   *scenario.VariantSpec
	index  int
	specN  int32  // Deployment spec.replicas
	pods   []*Pod // non-terminating pods (pending and ready), oldest first
	hpa    *HPA
	events int
}

// reqResult is the outcome of one request.
type reqResult struct {
	state int8 // 0 in flight or never finished, 1 done, 2 rejected
	ttft  float32
	itl   float32
}

const (
	reqDone     = 1
	reqRejected = 2
)

// Policy is one policy's emulated control plane: what runs every
// engine interval, what each variant's HPA reads, and the fast path from
// zero.
type Policy interface {
	// Start runs before the first event; the initial replicas exist.
	Start(f *Fleet)
	// Engine runs every engine interval (or every EnginePeriod() of a
	// control plane that has one).
	Engine(f *Fleet)
	// HPA returns the HPA behavior and minimum of a variant; nil for none.
	HPA(f *Fleet, v int) *HPA
	// Metric is what variant v's HPA reads: the summed metric and the
	// AverageValue target; ok=false when there is no value.
	Metric(f *Fleet, v int) (usage, target float64, ok bool)
	// ScaleFromZero is called when requests wait at the gateway of a model
	// whose variants are all at zero replicas.
	ScaleFromZero(f *Fleet)
}

// Fleet is one policy's simulation: the pods of every variant, the router,
// Prometheus and the control loop, driven by one event loop over a
// simulated clock.
type Fleet struct {
	sc    *scenario.Scenario
	trace *trace.Trace
	ctl   Policy
	now   time.Duration
	// origin is where measurement starts: the first `skip` requests of the
	// trace are a warm-up pre-roll played before it and not counted.
	origin  time.Duration
	skip    int
	costEnd time.Duration
	// preOrigin are the counters at origin, to subtract.
	preemptionsAtOrigin int64

	variants []*variantState
	pods     []*Pod // every pod ever created, by id
	live     []*Pod // not gone: pending, ready, terminating
	routable []*Pod // ready and not terminating
	steps    stepHeap
	gateway  []*seq
	// parked are held at the gateway too, with flow control, for a variant
	// able to hold them: no ready pod's KV cache can, so they wait beside
	// the queue rather than at its head (a 90k-token prompt that only an
	// H100 can hold must not stall the requests behind it).
	parked []*seq

	seqs        []seq
	next        int
	inFlight    int
	results     []reqResult
	completions completionLog
	fitsAny     func(in, out int32) bool

	nextScrape, nextEngine, nextHPA time.Duration
	nextReady, nextGrace, fastPath  time.Duration
	controlStart                    time.Duration

	timeline   []TimePoint
	bucketTTFT []float64
	bucketArr  int
	// bucketVariants counts per variant the bucket's requests sent to
	// its pods, finished and over each target (the totals are their sums).
	bucketVariants []VariantPoint
	doneBuf        []*seq
	preemptions    int64
	steps64        int64
	progress       func(now, end time.Duration)
}

func New(sc *scenario.Scenario, trace *trace.Trace, ctl Policy, initial []int32) *Fleet {
	return NewWarm(sc, trace, ctl, initial, Warmup{})
}

// Warmup is a pre-roll: the trace passed to the fleet starts with Skip
// requests played during [0, Origin), not measured.
type Warmup struct {
	Origin time.Duration
	Skip   int
}

// WithWarmup prepends the first d of the trace to it (the measured part
// then starts at d) and returns the longer trace and the warm-up. mirrored
// plays that part backwards (a request d-t before the measured start where
// the trace has it at t), so the warm-up ends at the rate the measured part
// starts with instead of the rate at d.
func WithWarmup(tr *trace.Trace, d time.Duration, mirrored bool) (*trace.Trace, Warmup) {
	if d <= 0 {
		return tr, Warmup{}
	}
	out := &trace.Trace{Name: tr.Name}
	for _, r := range tr.Requests {
		if r.Arrival >= d {
			break
		}
		if mirrored {
			r.Arrival = d - r.Arrival
		}
		out.Requests = append(out.Requests, r)
	}
	if mirrored {
		slices.Reverse(out.Requests)
	}
	w := Warmup{Origin: d, Skip: len(out.Requests)}
	for _, r := range tr.Requests {
		r.Arrival += d
		out.Requests = append(out.Requests, r)
	}
	return out, w
}

func NewWarm(sc *scenario.Scenario, tr *trace.Trace, ctl Policy, initial []int32, w Warmup) *Fleet {
	f := &Fleet{sc: sc, trace: tr, ctl: ctl, fastPath: never, nextReady: never, nextGrace: never,
		controlStart: sc.Control.MetricsWindow.D(), origin: w.Origin, skip: w.Skip}
	measured := trace.Trace{Requests: slices.Clone(tr.Requests[w.Skip:])}
	for i := range measured.Requests {
		measured.Requests[i].Arrival -= w.Origin
	}
	f.costEnd = w.Origin + CostHorizon(&measured, sc.Control.OracleInterval.D())
	f.seqs = make([]seq, len(tr.Requests))
	f.results = make([]reqResult, len(tr.Requests))
	for i := range sc.Variants {
		f.variants = append(f.variants, &variantState{spec: &sc.Variants[i], index: i})
	}
	f.bucketVariants = make([]VariantPoint, len(sc.Variants))
	f.fitsAny = func(in, out int32) bool {
		for _, v := range sc.Variants {
			if int64(in)+int64(out) <= v.Server.KVCapacityTokens() {
				return true
			}
		}
		return false
	}
	for i, n := range initial {
		vs := f.variants[i]
		vs.specN = n
		for range n {
			p := f.newPod(vs)
			// Started before the run, taking the variant's start-up
			// delay as every other pod (what the inventory measures).
			p.created, p.readyAt = -vs.spec.StartupDelay.D(), 0
			p.ready = true
			f.routable = append(f.routable, p)
		}
		vs.hpa = ctl.HPA(f, i)
		if vs.hpa != nil && n == 0 {
			// The HPA may bring a variant that starts at zero up by itself.
			vs.hpa.scaledToZero = true
		}
	}
	f.refreshNextReady()
	return f
}

// CostHorizon is the end of the trace rounded up to the oracle's interval:
// every policy and the oracle pay for [0, CostHorizon).
func CostHorizon(trace *trace.Trace, interval time.Duration) time.Duration {
	d := trace.Duration() + time.Nanosecond
	return (d + interval - 1) / interval * interval
}

// WallClock maps simulated time to the time handed to the pipeline.
func (f *Fleet) WallClock() time.Time { return Epoch.Add(f.now) }

func (f *Fleet) newPod(vs *variantState) *Pod {
	p := &Pod{id: len(f.pods), variant: vs.index, created: f.now, readyAt: f.now + vs.spec.StartupDelay.D(),
		srv: newServer(vs.spec.Server), heapIndex: -1}
	p.name = fmt.Sprintf("%s-%d", vs.spec.Name, p.id)
	f.pods = append(f.pods, p)
	f.live = append(f.live, p)
	vs.pods = append(vs.pods, p)
	return p
}

// SetReplicas is a write to the scale subresource; the ReplicaSet
// controller reconciles at once: new pods start Pending; on scale-down
// Pending pods go first (newest first), then Ready pods that have been
// ready the shortest time.
func (f *Fleet) SetReplicas(v int, n int32) {
	vs := f.variants[v]
	n = min(max(n, 0), vs.spec.MaxReplicas)
	if n == vs.specN {
		return
	}
	vs.specN = n
	if f.now >= f.origin {
		vs.events++
	}
	for int32(len(vs.pods)) < n {
		p := f.newPod(vs)
		if p.readyAt <= f.now {
			f.markReady(p)
		}
	}
	for int32(len(vs.pods)) > n {
		victim := -1
		for i := len(vs.pods) - 1; i >= 0; i-- {
			p := vs.pods[i]
			if victim < 0 || (!p.ready && vs.pods[victim].ready) ||
				(p.ready == vs.pods[victim].ready && p.readyAt > vs.pods[victim].readyAt) {
				victim = i
			}
		}
		p := vs.pods[victim]
		vs.pods = slices.Delete(vs.pods, victim, victim+1)
		f.terminate(p)
	}
	f.refreshNextReady()
}

func (f *Fleet) terminate(p *Pod) {
	p.terminating = true
	if i := slices.Index(f.routable, p); i >= 0 {
		f.routable = slices.Delete(f.routable, i, i+1)
	}
	if !p.ready || p.srv.idle() {
		f.remove(p)
		return
	}
	p.deadline = f.now + f.sc.Control.TerminationGrace.D()
	f.nextGrace = min(f.nextGrace, p.deadline)
}

func (f *Fleet) remove(p *Pod) {
	p.gone, p.goneAt = true, f.now
	if i := slices.Index(f.live, p); i >= 0 {
		f.live = slices.Delete(f.live, i, i+1)
	}
	if p.heapIndex >= 0 {
		heap.Remove(&f.steps, p.heapIndex)
	}
	f.refreshNextGrace()
}

func (f *Fleet) markReady(p *Pod) {
	p.ready = true
	f.routable = append(f.routable, p)
	parked, held := f.parked, f.gateway
	f.parked, f.gateway = nil, nil
	for _, q := range parked {
		f.route(q)
	}
	for _, q := range held {
		f.route(q)
	}
}

// Held counts the requests waiting at the gateway: the endpoint picker's
// flow-control queue.
func (f *Fleet) Held() int { return len(f.gateway) + len(f.parked) }

// canHold says whether some ready pod's KV cache can hold the request.
func (f *Fleet) canHold(q *seq) bool {
	for _, p := range f.routable {
		if p.srv.fits(q.input, q.output) {
			return true
		}
	}
	return false
}

// Flow control's saturation detector (llm-d defaults).
const (
	fcQueueDepth = 5
	fcKVUsage    = 0.8
)

func saturated(p *Pod) bool {
	return p.srv.numWaiting() >= fcQueueDepth || p.srv.kvUsage() >= fcKVUsage
}

// release dispatches requests held by flow control, oldest first, while
// some ready pod that can take the head request is not saturated. Parked
// requests go first, where a pod now holds them; a head no ready pod can
// hold is parked, and the queue goes on behind it.
func (f *Fleet) release() {
	if len(f.parked) > 0 {
		kept := f.parked[:0]
		for _, q := range f.parked {
			if best := f.pick(q, true); best != nil {
				f.dispatch(best, q)
				continue
			}
			kept = append(kept, q)
		}
		clear(f.parked[len(kept):])
		f.parked = kept
	}
	for len(f.gateway) > 0 {
		q := f.gateway[0]
		best := f.pick(q, true)
		if best == nil && (len(f.routable) == 0 || f.canHold(q)) {
			return
		}
		f.gateway[0] = nil
		f.gateway = f.gateway[1:]
		if best == nil {
			f.parked = append(f.parked, q)
			continue
		}
		f.dispatch(best, q)
	}
}

func (f *Fleet) refreshNextReady() {
	f.nextReady = never
	for _, p := range f.live {
		if !p.ready && !p.terminating {
			f.nextReady = min(f.nextReady, p.readyAt)
		}
	}
}

func (f *Fleet) refreshNextGrace() {
	f.nextGrace = never
	for _, p := range f.live {
		if p.terminating {
			f.nextGrace = min(f.nextGrace, p.deadline)
		}
	}
}

// route is the endpoint picker: among ready pods whose KV cache can hold
// the request, the best sum of a queue score (min-max normalised waiting
// requests) and a KV score (free cache fraction), as llm-d's default
// scorers weigh them; ties go to the pod with fewer running requests, then
// the older pod. With no ready pod the request waits at the gateway.
// With flow control, a request that finds every pod saturated waits at
// the gateway, behind any request already waiting there; one that no ready
// pod can hold is parked there until a pod that can is ready.
func (f *Fleet) route(q *seq) {
	var best *Pod
	fc := f.sc.Control.FlowControl
	if !fc || len(f.gateway) == 0 {
		best = f.pick(q, fc)
	}
	if best == nil {
		if fc && len(f.routable) > 0 && !f.canHold(q) {
			f.parked = append(f.parked, q)
		} else {
			f.gateway = append(f.gateway, q)
		}
		if f.fastPath == never && f.totalSpec() == 0 {
			f.fastPath = f.now + f.sc.Control.ScaleFromZeroDelay.D()
		}
		return
	}
	f.dispatch(best, q)
}

func (f *Fleet) dispatch(p *Pod, q *seq) {
	f.bucketVariants[p.variant].Dispatched++
	p.srv.enqueue(q)
	if !p.srv.busy {
		f.startStep(p)
	}
}

// pick scores the ready pods that can hold the request (skipping saturated
// ones when unsaturated is set) and returns the best, or nil.
func (f *Fleet) pick(q *seq, unsaturated bool) *Pod {
	minW, maxW := math.MaxInt, -1
	for _, p := range f.routable {
		w := p.srv.numWaiting()
		minW, maxW = min(minW, w), max(maxW, w)
	}
	var best *Pod
	bestScore := math.Inf(-1)
	for _, p := range f.routable {
		if !p.srv.fits(q.input, q.output) || (unsaturated && saturated(p)) {
			continue
		}
		queueScore := 1.0
		if maxW > minW {
			queueScore = float64(maxW-p.srv.numWaiting()) / float64(maxW-minW)
		}
		score := queueScore + (1 - p.srv.kvUsage())
		if best == nil || score > bestScore+1e-12 ||
			(math.Abs(score-bestScore) <= 1e-12 && len(p.srv.running) < len(best.srv.running)) {
			best, bestScore = p, score
		}
	}
	return best
}

func (f *Fleet) totalSpec() int32 {
	var n int32
	for _, vs := range f.variants {
		n += vs.specN
	}
	return n
}

func (f *Fleet) startStep(p *Pod) {
	d, ok := p.srv.schedule(f.now)
	if !ok {
		return
	}
	p.srv.busy = true
	p.srv.stepEnd = f.now + d
	heap.Push(&f.steps, p)
}

func (f *Fleet) completeStep(p *Pod) {
	p.srv.busy = false
	f.doneBuf = p.srv.complete(f.now, f.doneBuf[:0])
	for _, q := range f.doneBuf {
		f.finish(p, q)
	}
	if p.terminating && p.srv.idle() {
		f.remove(p)
		return
	}
	f.startStep(p)
	if f.sc.Control.FlowControl && f.Held() > 0 && !saturated(p) {
		f.release()
	}
}

func (f *Fleet) finish(p *Pod, q *seq) {
	f.inFlight--
	f.completions.add(f.now)
	if int(q.req) < f.skip {
		return
	}
	r := &f.results[q.req]
	r.state = reqDone
	r.ttft = float32((q.firstToken - q.arrival).Seconds())
	if q.output > 1 {
		r.itl = float32((f.now - q.firstToken).Seconds() / float64(q.output-1))
	}
	f.bucketTTFT = append(f.bucketTTFT, float64(r.ttft))
	vp := &f.bucketVariants[p.variant]
	vp.Finished++
	if f.overTTFT(*r) {
		vp.MissedTTFT++
	}
	if f.overITL(*r) {
		vp.MissedITL++
	}
}

// Met says whether request i finished within the SLO.
func (f *Fleet) Met(i int) bool {
	r := f.results[i]
	return r.state == reqDone && !f.overTTFT(r) && !f.overITL(r)
}

// overTTFT and overITL say whether a finished request missed each target.
func (f *Fleet) overTTFT(r reqResult) bool {
	return float64(r.ttft) > f.sc.SLO.TTFT.D().Seconds()+1e-9
}

func (f *Fleet) overITL(r reqResult) bool {
	return float64(r.itl) > f.sc.SLO.ITL.D().Seconds()+1e-9
}

func (f *Fleet) arrive() {
	r := f.trace.Requests[f.next]
	q := &f.seqs[f.next]
	*q = seq{req: int32(f.next), arrival: r.Arrival, input: max(r.Input, 1), output: max(r.Output, 1), firstToken: -1}
	q.prompt = q.input
	f.next++
	f.bucketArr++
	if !f.fitsAny(q.input, q.output) {
		f.results[q.req].state = reqRejected
		return
	}
	f.inFlight++
	f.route(q)
}

// expireGrace ends the grace period of terminating pods: what they still
// hold is retried on other pods (context recomputed there).
func (f *Fleet) expireGrace() {
	for _, p := range slices.Clone(f.live) {
		if p.terminating && p.deadline <= f.now {
			for _, q := range p.srv.evict() {
				q.preempted++
				f.route(q)
			}
			f.remove(p)
		}
	}
	f.refreshNextGrace()
}

func (f *Fleet) readyDue() {
	for _, p := range slices.Clone(f.live) {
		if !p.ready && !p.terminating && p.readyAt <= f.now {
			f.markReady(p)
		}
	}
	f.refreshNextReady()
}

func (f *Fleet) scrape() {
	for _, p := range f.routable {
		s := p.srv
		p.prom.add(sample{at: f.now, kv: s.kvUsage(), waiting: float64(s.numWaiting()), running: float64(len(s.running)),
			finished: s.finished, finishedIn: s.finishedIn, finishedOut: s.finishedOut,
			arrived: s.arrived, ttftSum: s.ttftSum, ttftCount: s.ttftCount, itlSum: s.itlSum, itlCount: s.itlCount, tpot: s.tpot, queue: s.queue, ttft: s.ttft})
	}
}

func (f *Fleet) syncHPAs() {
	for i, vs := range f.variants {
		if vs.hpa == nil {
			continue
		}
		usage, target, ok := f.ctl.Metric(f, i)
		f.SetReplicas(i, vs.hpa.Sync(f.now, vs.specN, usage, target, ok))
	}
}

// ReadyPods are the variant's Ready, non-terminating pods.
func (f *Fleet) ReadyPods(v int) []*Pod {
	var out []*Pod
	for _, p := range f.variants[v].pods {
		if p.ready {
			out = append(out, p)
		}
	}
	return out
}

func (f *Fleet) PendingPods(v int) int32 {
	var n int32
	for _, p := range f.variants[v].pods {
		if !p.ready {
			n++
		}
	}
	return n
}

// Run drives the event loop until every request has finished (or the drain
// limit past the trace).
func (f *Fleet) Run() {
	f.ctl.Start(f)
	sc := f.sc.Control
	hardEnd := f.costEnd + drainLimit
	// The simulated fleet has no history: the control loop starts once the
	// first metrics window is full, as if it had been running all along.
	f.nextEngine = f.controlStart
	f.nextHPA = f.controlStart + sc.HPASyncPeriod.D()/2
	engineEvery := sc.EngineInterval.D()
	if c, ok := f.ctl.(interface{ EnginePeriod() time.Duration }); ok {
		// A control plane with a cadence of its own (the KPA's 1 s scrape).
		engineEvery = c.EnginePeriod()
	}
	for {
		tArr := never
		if f.next < len(f.trace.Requests) {
			tArr = f.trace.Requests[f.next].Arrival
		}
		tStep := never
		if len(f.steps) > 0 {
			tStep = f.steps[0].srv.stepEnd
		}
		tTick := min(f.nextScrape, f.nextEngine, f.nextHPA)
		t := min(tArr, tStep, tTick, f.nextReady, f.nextGrace, f.fastPath)
		if t > hardEnd || (tArr == never && f.inFlight == 0 && f.now >= f.costEnd) {
			break
		}
		f.now = t
		switch t {
		case f.nextReady:
			f.readyDue()
		case f.nextGrace:
			f.expireGrace()
		case tStep:
			p := heap.Pop(&f.steps).(*Pod)
			f.completeStep(p)
		case tArr:
			f.arrive()
		case f.fastPath:
			f.fastPath = never
			if f.totalSpec() == 0 && f.Held() > 0 {
				f.ctl.ScaleFromZero(f)
			}
		case f.nextScrape:
			f.scrape()
			f.recordTimePoint()
			f.nextScrape += sc.ScrapeInterval.D()
			if f.progress != nil && f.now >= f.origin {
				f.progress(f.now-f.origin, f.costEnd-f.origin)
			}
		case f.nextEngine:
			f.ctl.Engine(f)
			f.nextEngine += engineEvery
		case f.nextHPA:
			f.syncHPAs()
			f.nextHPA += sc.HPASyncPeriod.D()
		}
	}
	for _, p := range f.pods {
		f.preemptions += p.srv.preemptions
		f.steps64 += p.srv.steps
	}
	f.preemptions -= f.preemptionsAtOrigin
}

// TimePoint is the fleet at one scrape, for charts.
type TimePoint struct {
	At       time.Duration `json:"-"`
	Seconds  float64       `json:"t"`
	Replicas []int32       `json:"replicas"`
	Ready    []int32       `json:"ready"`
	// ArrivalRate is requests per second since the previous point.
	ArrivalRate float64 `json:"arrivalRate"`
	// KVUsage is the mean KV cache usage of ready pods.
	KVUsage float64 `json:"kvUsage"`
	// Waiting counts requests queued in servers and at the gateway;
	// Running those in a server's batch.
	Waiting int `json:"waiting"`
	Running int `json:"running"`
	// TTFT percentiles (seconds) of the requests that finished since the
	// previous point; NaN-free: 0 when none finished.
	TTFTp50 float64 `json:"ttftP50"`
	TTFTp99 float64 `json:"ttftP99"`
	// Finished counts the requests that finished since the previous
	// point; MissedTTFT and MissedITL those of them over each target (a
	// request can miss both).
	Finished   int `json:"finished"`
	MissedTTFT int `json:"missedTTFT"`
	MissedITL  int `json:"missedITL"`
	// Variants splits the requests by the variant whose pods ran them
	// (in the scenario's order): where the gateway sent the load and
	// which variant missed.
	Variants []VariantPoint `json:"variants"`
}

// VariantPoint is one variant's share of a TimePoint.
type VariantPoint struct {
	// Dispatched counts the requests the gateway sent to its pods since
	// the previous point (a request evicted and sent again counts again);
	// Running those in its pods' batches.
	Dispatched int `json:"dispatched"`
	Running    int `json:"running"`
	Finished   int `json:"finished"`
	MissedTTFT int `json:"missedTTFT"`
	MissedITL  int `json:"missedITL"`
}

func (f *Fleet) recordTimePoint() {
	if f.now < f.origin {
		f.bucketArr = 0
		f.bucketTTFT = f.bucketTTFT[:0]
		clear(f.bucketVariants)
		return
	}
	if len(f.timeline) == 0 {
		for _, p := range f.pods {
			f.preemptionsAtOrigin += p.srv.preemptions
		}
	}
	if f.now > f.costEnd {
		return
	}
	at := f.now - f.origin
	tp := TimePoint{At: at, Seconds: at.Seconds(), Waiting: f.Held()}
	interval := f.sc.Control.ScrapeInterval.D()
	if len(f.timeline) > 0 {
		interval = at - f.timeline[len(f.timeline)-1].At
	}
	if interval > 0 && len(f.timeline) > 0 {
		tp.ArrivalRate = float64(f.bucketArr) / interval.Seconds()
	}
	f.bucketArr = 0
	for _, vs := range f.variants {
		tp.Replicas = append(tp.Replicas, vs.specN)
		var ready int32
		for _, p := range vs.pods {
			if p.ready {
				ready++
			}
		}
		tp.Ready = append(tp.Ready, ready)
	}
	tp.Variants = slices.Clone(f.bucketVariants)
	clear(f.bucketVariants)
	for _, vp := range tp.Variants {
		tp.MissedTTFT += vp.MissedTTFT
		tp.MissedITL += vp.MissedITL
	}
	var kv float64
	for _, p := range f.routable {
		kv += p.srv.kvUsage()
		tp.Waiting += p.srv.numWaiting()
		tp.Running += len(p.srv.running)
		tp.Variants[p.variant].Running += len(p.srv.running)
	}
	if len(f.routable) > 0 {
		tp.KVUsage = kv / float64(len(f.routable))
	}
	tp.Finished = len(f.bucketTTFT)
	if len(f.bucketTTFT) > 0 {
		slices.Sort(f.bucketTTFT)
		tp.TTFTp50 = percentileSorted(f.bucketTTFT, 0.50)
		tp.TTFTp99 = percentileSorted(f.bucketTTFT, 0.99)
		f.bucketTTFT = f.bucketTTFT[:0]
	}
	f.timeline = append(f.timeline, tp)
}

// percentileSorted is the nearest-rank percentile of sorted values.
func percentileSorted(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// stepHeap orders pods by the end of their step in flight (then by id, so
// runs are deterministic).
type stepHeap []*Pod

func (h stepHeap) Len() int { return len(h) }
func (h stepHeap) Less(i, j int) bool {
	if h[i].srv.stepEnd != h[j].srv.stepEnd {
		return h[i].srv.stepEnd < h[j].srv.stepEnd
	}
	return h[i].id < h[j].id
}
func (h stepHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *stepHeap) Push(x any) {
	p := x.(*Pod)
	p.heapIndex = len(*h)
	*h = append(*h, p)
}
func (h *stepHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.heapIndex = -1
	return p
}
