package policies

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/fit"
	"github.com/wva-project/wva/pkg/sim/fleet"
)

// Upstream WVA's throughput analyzer (internal/engines/analyzers/throughput,
// 2026), written here from its description: supply and demand of decode
// tokens per second. The defaults are upstream's constants (its
// constants.go; docs/design.md#upstream-throughput-analyzer gives the
// formulas, not the numbers).
const (
	// tpKSat is the KV utilization at which a replica's supply is
	// evaluated (upstream DefaultKSat, equal to its saturation
	// scaleUpThreshold).
	tpKSat = 0.85
	// tpQueueDrainFactor: requests held at the EPP count as
	// queue / (factor x ITL(k_sat)) tokens/s of demand.
	tpQueueDrainFactor = 2.0
	// The (k, ITL) observation window: at most 20 observations, none older
	// than 30 minutes, k within [0.15, 0.85]; the least-squares fit needs
	// 10 of them spanning 0.30 of k.
	tpWindowMaxSize     = 20
	tpObservationMaxAge = 30 * time.Minute
	tpMinSamples        = 10
	tpMinKSpread        = 0.30
	tpMinObservableK    = 0.15
	tpMaxObservableK    = 0.85
	// tpBaselineITL is B while the window is short and no fit has
	// succeeded yet: upstream's H100 figure at near-zero load, seconds.
	tpBaselineITL = 0.006
	// tpShapeChangeTolerance: a 20% shift of the average input or output
	// length clears the window (the fit belongs to the old shape).
	tpShapeChangeTolerance = 0.20
	// The engine's post-step thresholds on demand / supply (upstream's
	// saturation config defaults, the scenario's wva entry has the same).
	tpScaleUpThreshold  = 0.85
	tpScaleDownBoundary = 0.70
)

// itlFit is ITL(k) = A*k + B in seconds per token, k the KV utilization.
type itlFit struct{ A, B float64 }

func (m itlFit) at(k float64) float64 { return m.A*k + m.B }

// itlObs is one healthy replica's cycle: instant KV utilization and mean
// ITL over the metrics window.
type itlObs struct {
	k, itl float64
	at     time.Duration
}

// itlWindow is a variant's rolling window of observations.
type itlWindow struct{ obs []itlObs }

// add keeps o when k is in the observable range and ITL is positive,
// evicting the oldest beyond the window's size.
func (w *itlWindow) add(o itlObs) {
	if o.k < tpMinObservableK || o.k > tpMaxObservableK || !(o.itl > 0) {
		return
	}
	w.obs = append(w.obs, o)
	if len(w.obs) > tpWindowMaxSize {
		w.obs = w.obs[len(w.obs)-tpWindowMaxSize:]
	}
}

// prune drops observations older than the maximum age.
func (w *itlWindow) prune(now time.Duration) {
	w.obs = slices.DeleteFunc(w.obs, func(o itlObs) bool { return now-o.at > tpObservationMaxAge })
}

// ready says the window can carry an unconstrained fit.
func (w *itlWindow) ready() bool {
	if len(w.obs) < tpMinSamples {
		return false
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, o := range w.obs {
		lo, hi = math.Min(lo, o.k), math.Max(hi, o.k)
	}
	return hi-lo >= tpMinKSpread
}

// fitITL is the two-tier fit: least squares (fit.Linear) over the window
// when it is ready; otherwise A alone by least squares over this cycle's
// points with B pinned (A = sum((ITL-B)k) / sum(k^2)). ols says the first
// tier was used (its B is then worth pinning later). An unconstrained fit
// with a negative slope or intercept falls back to the pinned one, and a
// pinned slope below zero is taken as flat (both our assumptions: a model
// whose ITL falls with load would overstate supply).
func fitITL(w *itlWindow, current []itlObs, pinnedB float64) (m itlFit, ols, ok bool) {
	if w.ready() {
		ks, itls := make([]float64, len(w.obs)), make([]float64, len(w.obs))
		for i, o := range w.obs {
			ks[i], itls[i] = o.k, o.itl
		}
		if l, ok := fit.Linear(ks, itls); ok && l.Slope >= 0 && l.Intercept > 0 {
			return itlFit{A: l.Slope, B: l.Intercept}, true, true
		}
	}
	var num, den float64
	for _, o := range current {
		if o.k > 0 && o.itl > 0 {
			num += (o.itl - pinnedB) * o.k
			den += o.k * o.k
		}
	}
	if den == 0 {
		return itlFit{}, false, false
	}
	return itlFit{A: math.Max(0, num/den), B: pinnedB}, false, true
}

// tpVariant is one variant as the throughput decision sees it.
type tpVariant struct {
	Cost     float64
	Min, Max int32
	// Ready replicas supply now; Pending ones (created, not Ready) count
	// in the anticipated supply.
	Ready, Pending int32
	// Fit is the variant's ITL model; without one (HasFit false) the
	// variant supplies nothing and is never chosen.
	Fit    itlFit
	HasFit bool
	// KVMax is num_gpu_blocks x block_size; KVPerRequest the time-averaged
	// KV footprint of a decoding request, input + output/2 tokens.
	KVMax, KVPerRequest float64
}

// perReplicaSupply is (k_sat x KV_max / KV per request) / ITL(k_sat):
// the decode tokens/s of one replica holding k_sat of its KV cache.
func (v tpVariant) perReplicaSupply() float64 {
	itl := v.Fit.at(tpKSat)
	if !v.HasFit || !(itl > 0) || !(v.KVPerRequest > 0) {
		return 0
	}
	return tpKSat * v.KVMax / v.KVPerRequest / itl
}

// tpInput is one cycle of the model.
type tpInput struct {
	Variants []tpVariant
	// ArrivalRate is the model's requests/s counted at the EPP;
	// CompletionRate (vLLM's request_success_total rate) stands in when
	// it is zero.
	ArrivalRate, CompletionRate float64
	// OutputTokens is the average generated tokens per request.
	OutputTokens float64
	// QueueSize is the requests held in the EPP's flow-control queue.
	QueueSize float64
}

// tpDecision is the throughput analyzer's answer, tokens/s throughout.
type tpDecision struct {
	Targets                     []int32
	Demand, Supply, Anticipated float64
}

// throughputDecide sizes decode supply to demand. Targets start at
// ready + pending; RC = D/0.85 - anticipated adds ceil(RC/PRC) replicas
// to the variant with the lowest cost per unit of supply (the next one
// when it reaches its max: our assumption), SC = supply - D/0.70 removes
// floor(SC/PRC), most expensive per unit of supply first. ok is false
// when no variant has an ITL model: the analyzer abstains.
func throughputDecide(in tpInput) (d tpDecision, ok bool) {
	n := len(in.Variants)
	prc := make([]float64, n)
	var itlSat float64
	var fitted int
	d.Targets = make([]int32, n)
	for i, v := range in.Variants {
		d.Targets[i] = v.Ready + v.Pending
		if prc[i] = v.perReplicaSupply(); prc[i] > 0 {
			d.Supply += float64(v.Ready) * prc[i]
			d.Anticipated += float64(v.Ready+v.Pending) * prc[i]
			itlSat += v.Fit.at(tpKSat)
			fitted++
		}
	}
	if fitted == 0 {
		return tpDecision{}, false
	}
	rate := in.ArrivalRate
	if !(rate > 0) {
		rate = in.CompletionRate
	}
	d.Demand = rate * in.OutputTokens
	// The queue is model-level: drained at the fitted variants' mean
	// ITL(k_sat).
	d.Demand += in.QueueSize / (tpQueueDrainFactor * itlSat / float64(fitted))

	// Variants with supply, cheapest per token/s first.
	var order []int
	for i := range n {
		if prc[i] > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return in.Variants[order[a]].Cost/prc[order[a]] < in.Variants[order[b]].Cost/prc[order[b]]
	})
	const eps = 1e-9
	if rc := d.Demand/tpScaleUpThreshold - d.Anticipated; rc > eps {
		for _, i := range order {
			add := min(int32(math.Ceil(rc/prc[i]-eps)), max(0, in.Variants[i].Max-d.Targets[i]))
			d.Targets[i] += add
			if rc -= float64(add) * prc[i]; rc <= eps {
				break
			}
		}
	} else if sc := d.Supply - d.Demand/tpScaleDownBoundary; sc > eps {
		for _, i := range slices.Backward(order) {
			rm := min(int32(math.Floor(sc/prc[i]+eps)), max(0, d.Targets[i]-in.Variants[i].Min))
			d.Targets[i] -= rm
			sc -= float64(rm) * prc[i]
		}
	}
	for i, v := range in.Variants {
		d.Targets[i] = min(max(d.Targets[i], v.Min), v.Max)
	}
	return d, true
}

// combineTargets merges the saturation (percentage) analyzer's targets
// with the throughput analyzer's as upstream's engine does: the larger
// per variant, so either analyzer can scale a variant up and it comes
// down only when both ask for fewer. An abstaining throughput analyzer
// leaves the saturation analyzer's targets.
func combineTargets(sat, tp []int32, tpOK bool) []int32 {
	out := slices.Clone(sat)
	if !tpOK {
		return out
	}
	for i := range out {
		out[i] = max(out[i], tp[i])
	}
	return out
}

// throughputPolicy is upstream WVA's newest default: the throughput
// analyzer beside the percentage-based saturation analyzer (wva-v1's),
// combined by combineTargets every engine interval (the same interval as
// wva-v1, not upstream's 15 s, so the two differ only in how they
// decide). Reactive: no start-up horizon. Its decision reaches the same
// HPA as wva's and wva-v1's.
type throughputPolicy struct {
	// v1Policy holds the decision of record (desired) and serves it to
	// the HPA as wva-v1 does; the saturation analyzer's transition
	// blocking compares it with spec.replicas, as upstream's does with the
	// emitted value.
	v1Policy
	variants []tpState
}

// tpState is what the analyzer remembers of a variant between cycles.
type tpState struct {
	window   itlWindow
	il, ol   float64 // the workload shape the window belongs to
	hasShape bool
	// lastB is the B of the last unconstrained fit, pinned while the
	// window is short again (a shape change clears the window, not B).
	lastB float64
	hasB  bool
}

func (p *throughputPolicy) Start(f *fleet.Fleet) {
	p.v1Policy.Start(f)
	p.variants = make([]tpState, len(f.Scenario().Variants))
}

func (p *throughputPolicy) Engine(f *fleet.Fleet) {
	sat := slices.Clone(p.desired)
	v1Decide(p.cfg, f.Scenario().Variants, observeV1(f), sat)
	d, ok := throughputDecide(p.observe(f))
	p.desired = combineTargets(sat, d.Targets, ok)
	p.decided = true
}

// observe reads the series upstream's collector queries: per ready pod
// the instant KV usage, the mean ITL over the metrics window and the 5m
// token averages (healthy = all three present); the EPP's arrivals and
// flow-control queue; vLLM's completions.
func (p *throughputPolicy) observe(f *fleet.Fleet) tpInput {
	window := f.Scenario().Control.MetricsWindow.D()
	in := tpInput{
		ArrivalRate:    f.ArrivalsOver(window) / window.Seconds(),
		CompletionRate: f.CompletionsOver(window) / window.Seconds(),
		QueueSize:      float64(f.Held()),
	}
	var olSum float64
	var olN int
	for v, spec := range f.Scenario().Variants {
		st := &p.variants[v]
		tv := tpVariant{Cost: spec.Cost, Min: spec.MinReplicas, Max: spec.MaxReplicas,
			Pending: f.PendingPods(v), KVMax: float64(spec.Server.KVCapacityTokens())}
		var current []itlObs
		var il, ol float64
		for _, pod := range f.ReadyPods(v) {
			tv.Ready++
			kv, _, ok := pod.Latest(f.Now())
			w, okRate := pod.Rates(f.Now(), window)
			itl := w.ITL
			pin, pout, okTok := pod.TokenAverages(f.Now())
			if !ok || !okRate || !okTok || !(itl > 0) {
				continue
			}
			current = append(current, itlObs{k: kv, itl: itl, at: f.Now()})
			il, ol = il+pin, ol+pout
		}
		if len(current) > 0 {
			il, ol = il/float64(len(current)), ol/float64(len(current))
			olSum, olN = olSum+ol, olN+1
			if st.hasShape && (shifted(il, st.il) || shifted(ol, st.ol)) {
				st.window = itlWindow{}
			}
			if !st.hasShape || len(st.window.obs) == 0 {
				st.il, st.ol, st.hasShape = il, ol, true
			}
			for _, o := range current {
				st.window.add(o)
			}
		}
		st.window.prune(f.Now())
		pinned := tpBaselineITL
		if st.hasB {
			pinned = st.lastB
		}
		if m, ols, ok := fitITL(&st.window, current, pinned); ok && st.hasShape {
			tv.Fit, tv.HasFit = m, true
			if ols {
				st.lastB, st.hasB = m.B, true
			}
			tv.KVPerRequest = st.il + st.ol/2
		}
		in.Variants = append(in.Variants, tv)
	}
	if olN > 0 {
		in.OutputTokens = olSum / float64(olN)
	}
	return in
}

// shifted says x moved more than the shape tolerance away from ref.
func shifted(x, ref float64) bool {
	return ref > 0 && math.Abs(x-ref)/ref > tpShapeChangeTolerance
}
