// Package queueing implements the SLO analyzer of upstream WVA
// (docs/design.md#queueing-model): an extended Kalman filter learns each
// variant's service-time parameters from observed latencies, a
// state-dependent M/M/1/K model of one replica gives the largest arrival
// rate that still meets the TTFT and ITL targets, and the group needs
// ceil(arrival rate / that rate) replicas.
//
// The analyzer is a pure function: the filter's state per variant is the
// State it returns and is handed back on the next cycle.
package queueing

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Name is the analyzer's name in configuration and decision reasons.
const Name = params.AnalyzerQueueingModel

// Defaults and guards of the analyzer.
const (
	// DefaultMaxBatch is vLLM's default --max-num-seqs.
	DefaultMaxBatch = 256
	// MaxModeledBatch caps the batch the model represents (the chain has
	// one state per request in service); larger --max-num-seqs are
	// modeled as this many.
	MaxModeledBatch = 8192
	// QueuePerBatchSlot sets the modeled queue: MaxQueue = 10 * MaxBatch.
	// vLLM does not bound its waiting queue; a long finite queue keeps the
	// chain finite while making blocking negligible below saturation.
	QueuePerBatchSlot = 10
	// MaxObservationsPerCycle bounds filter updates per variant and cycle.
	MaxObservationsPerCycle = 8
	// SettleCycles is how many cycles the tuner skips after a variant
	// scaled up: new replicas warm up and the load is moving
	// (upstream waits 120 s; 4 cycles of the 30 s engine interval).
	SettleCycles = 4
	// TrustedAfter accepted updates the learned parameters set inferred
	// targets; before that the observed-latency fallback applies.
	TrustedAfter = 3
	// Fallback targets: observed latency times FallbackHeadroom, at most
	// FallbackMaxTTFTms / FallbackMaxITLms.
	FallbackHeadroom  = 1.5
	FallbackMaxTTFTms = 10000
	FallbackMaxITLms  = 200
)

// Where targets and parameters came from.
const (
	TargetExplicit = "explicit"
	TargetInferred = "inferred"
	TargetFallback = "fallback-observed"
	TargetNone     = "none"

	ParamsLearned = "learned"
	ParamsSeeded  = "seeded"
	ParamsNone    = "none"

	RateModel    = "model"
	RateAssumed  = "assumed-from-other-variants"
	RateUnknown  = "unknown"
	RateIdleOnly = "infeasible-target-utilization"
)

// VariantAnalysis is one variant's intermediate quantities.
type VariantAnalysis struct {
	Name    string `json:"name"`
	Ready   int32  `json:"ready"`
	Pending int32  `json:"pending"`
	// ArrivalRate is the variant's total observed arrival rate (req/s).
	ArrivalRate     float64       `json:"arrivalRate"`
	Workload        Workload      `json:"workload"`
	WorkloadSource  string        `json:"workloadSource"`
	ObservedTTFTms  float64       `json:"observedTTFTms"`
	ObservedITLms   float64       `json:"observedITLms"`
	Server          Server        `json:"server"`
	Params          Params        `json:"params"`
	ParamsStdDev    Params        `json:"paramsStdDev"`
	Covariance      [3][3]float64 `json:"covariance"`
	ParamsSource    string        `json:"paramsSource"`
	TunerUpdates    int           `json:"tunerUpdates"`
	Tuning          []Step        `json:"tuning,omitempty"`
	TuningSkipped   string        `json:"tuningSkipped,omitempty"`
	TargetTTFTms    float64       `json:"targetTTFTms"`
	TargetITLms     float64       `json:"targetITLms"`
	TargetSource    string        `json:"targetSource"`
	Capacity        *Capacity     `json:"capacity,omitempty"`
	RatePerReplica  float64       `json:"ratePerReplica"`
	RateSource      string        `json:"rateSource"`
	Note            string        `json:"note,omitempty"`
	DesiredReplicas int32         `json:"desiredReplicasAlone"`
}

// Analysis is the analyzer's intermediate quantities for the group.
type Analysis struct {
	SLOMultiplier     float64           `json:"sloMultiplier"`
	TuningEnabled     bool              `json:"tuningEnabled"`
	TotalArrivalRate  float64           `json:"totalArrivalRate"`
	Variants          []VariantAnalysis `json:"variants"`
	Supply            float64           `json:"supply"`
	AnticipatedSupply float64           `json:"anticipatedSupply"`
	RequiredCapacity  float64           `json:"requiredCapacity"`
	SpareCapacity     float64           `json:"spareCapacity"`
	Why               string            `json:"why"`
	// Roles, for a prefill/decode disaggregated group, is each role's own
	// analysis (roles.go); the fields above then hold only the summed
	// required and spare capacity and the reason.
	Roles []RoleAnalysis `json:"roles,omitempty"`
}

// Summary implements analyzer.Summarizer.
func (a Analysis) Summary() []string {
	if len(a.Roles) > 0 {
		var lines []string
		for _, r := range a.Roles {
			lines = append(lines, analyzer.RoleSummary(r.Role, r.Analysis)...)
		}
		return lines
	}
	lines := []string{fmt.Sprintf("arrival %.3f req/s; supply %.3f req/s (anticipated %.3f); required %.3f, spare %.3f",
		a.TotalArrivalRate, a.Supply, a.AnticipatedSupply, a.RequiredCapacity, a.SpareCapacity)}
	for _, v := range a.Variants {
		lines = append(lines, fmt.Sprintf("  variant %s: ready %d, pending %d, arrival %.3f req/s, I %.0f O %.0f (%s), observed TTFT %.1f ms ITL %.2f ms",
			v.Name, v.Ready, v.Pending, v.ArrivalRate, v.Workload.InputTokens, v.Workload.OutputTokens, v.WorkloadSource, v.ObservedTTFTms, v.ObservedITLms))
		sd := v.ParamsStdDev
		if v.ParamsSource != ParamsNone {
			lines = append(lines, fmt.Sprintf("    params (%s, %d updates): alpha %.4g±%.2g ms, beta %.4g±%.2g ms, gamma %.4g±%.2g ms",
				v.ParamsSource, v.TunerUpdates, v.Params.Alpha, sd.Alpha, v.Params.Beta, sd.Beta, v.Params.Gamma, sd.Gamma))
		}
		for _, s := range v.Tuning {
			lines = append(lines, fmt.Sprintf("    tuner %s: accepted %v, NIS %.2f, predicted TTFT %.1f ITL %.2f, observed TTFT %.1f ITL %.2f %s",
				s.Pod, s.Accepted, s.NIS, s.Predicted[0], s.Predicted[1], s.Observed[0], s.Observed[1], s.Note))
		}
		if v.TuningSkipped != "" {
			lines = append(lines, "    tuning skipped: "+v.TuningSkipped)
		}
		line := fmt.Sprintf("    rate per replica %.3f req/s (%s)", v.RatePerReplica, v.RateSource)
		if v.TargetSource != TargetNone {
			line = fmt.Sprintf("    targets (%s): TTFT %.1f ms, ITL %.2f ms;%s", v.TargetSource, v.TargetTTFTms, v.TargetITLms, line[3:])
		}
		if c := v.Capacity; c != nil {
			line += fmt.Sprintf(", bound %s, at that rate TTFT %.1f ITL %.2f batch %.1f, saturation %.3f req/s",
				c.Bound, c.AtMaxRate.TTFTms, c.AtMaxRate.ITLms, c.AtMaxRate.InService, c.Saturation)
		}
		lines = append(lines, line)
		if v.Note != "" {
			lines = append(lines, "    note: "+v.Note)
		}
	}
	return lines
}

// State is what the analyzer remembers about one group between cycles.
type State struct {
	// Analyzer is always Name.
	Analyzer string                  `json:"analyzer"`
	Variants map[string]VariantState `json:"variants,omitempty"`
}

// VariantState is one variant's memory.
type VariantState struct {
	// Tuner is nil until the first observation seeds it.
	Tuner    *TunerState `json:"tuner,omitempty"`
	Workload *Workload   `json:"workload,omitempty"`
	// LastReplicas is the replica count seen last cycle; SettleCycles
	// counts down the cycles without tuning after a scale-up.
	LastReplicas int32 `json:"lastReplicas"`
	SettleCycles int   `json:"settleCycles,omitempty"`
}

func (s State) clone(g decision.Group) State {
	out := State{Analyzer: Name, Variants: map[string]VariantState{}}
	for _, v := range g.Variants {
		vs, ok := s.Variants[v.Name]
		if !ok {
			continue
		}
		if vs.Tuner != nil {
			t := *vs.Tuner
			vs.Tuner = &t
		}
		if vs.Workload != nil {
			w := *vs.Workload
			vs.Workload = &w
		}
		out.Variants[v.Name] = vs
	}
	return out
}

// Analyzer is the queueing-model SLO analyzer.
type Analyzer struct {
	// Tuner configures the filter; the zero value means DefaultTuner().
	Tuner *Tuner
}

// Name implements analyzer.Analyzer.
func (Analyzer) Name() string { return Name }

// Analyze implements analyzer.Analyzer (no memory of earlier cycles).
func (a Analyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	return a.AnalyzeState(g, cfg, nil)
}

// AnalyzeState implements analyzer.Stateful. The signal is in requests per
// second: CapacityPerReplica is each variant's maximum rate per replica,
// RequiredCapacity = max(0, arrival - anticipated supply) and
// SpareCapacity = max(0, supply - arrival), so a lone variant ends at
// ceil(arrival / rate) replicas.
func (a Analyzer) AnalyzeState(g decision.Group, cfg params.Resolved, prev any) (analyzer.Result, error) {
	st, ok := analyzer.DecodeState[State](prev)
	if !ok || st.Analyzer != Name {
		st = State{}
	}
	next := st.clone(g)
	tuner := DefaultTuner()
	if a.Tuner != nil {
		tuner = *a.Tuner
	}
	qm := params.DefaultQueueingModel()
	if cfg.QueueingModel != nil {
		qm = *cfg.QueueingModel
	}
	var an Analysis
	var sig decision.Signal
	if parts := g.ByRole(); len(parts) > 1 {
		an, sig = analyzeRoles(parts, qm, cfg.Scaling.Priority, tuner, &next)
	} else {
		an, sig = analyze(g, qm, cfg.Scaling.Priority, tuner, &next)
	}
	return analyzer.Result{Signal: sig, Details: an, State: next}, nil
}

type groupObs struct {
	arrival, ttft, itl, in, out, tokW float64
	// latArrival is the arrival rate of the replicas that report both
	// latencies: the weight of the ttft and itl sums, so a replica with
	// traffic but no finite latency does not dilute the mean.
	latArrival float64
}

// latencies returns the arrival-weighted mean TTFT and ITL, ok false when
// no replica reported both.
func (o groupObs) latencies() (ttft, itl float64, ok bool) {
	if o.latArrival <= 0 {
		return 0, 0, false
	}
	return o.ttft / o.latArrival, o.itl / o.latArrival, true
}

// analyze sizes every variant, prices unknown ones at the lowest known rate,
// then compares the group's arrival with its supply.
func analyze(g decision.Group, qm params.QueueingModel, priority float64, tuner Tuner, st *State) (Analysis, decision.Signal) {
	an := Analysis{SLOMultiplier: qm.SLOMultiplier, TuningEnabled: qm.TuningEnabled, Variants: make([]VariantAnalysis, 0, len(g.Variants))}
	variants := append([]decision.Variant(nil), g.Variants...)
	sort.Slice(variants, func(i, j int) bool { return variants[i].Name < variants[j].Name })
	byVariant := replicasByVariant(g.Replicas)
	// Scratch space of every model solved for the group.
	var buf []float64
	var group groupObs
	for _, v := range variants {
		for _, r := range byVariant[v.Name] {
			group.add(r)
		}
	}
	an.TotalArrivalRate = group.arrival

	for _, v := range variants {
		an.Variants = append(an.Variants, analyzeVariant(v, byVariant[v.Name], group, qm, tuner, st, &buf))
	}

	sig := decision.Signal{Analyzer: Name, Priority: priority, CapacityPerReplica: map[string]float64{}}
	lowest, pending := an.supply(sig.CapacityPerReplica)
	an.capacity(g, variants, lowest, pending, sig.CapacityPerReplica)
	sig.RequiredCapacity, sig.SpareCapacity = an.RequiredCapacity, an.SpareCapacity
	sig.Reason = "queueing-model: " + an.Why
	return an, sig
}

// replicasByVariant groups the replicas by variant, keeping their order.
func replicasByVariant(replicas []decision.ReplicaMetrics) map[string][]decision.ReplicaMetrics {
	count := map[string]int{}
	for _, r := range replicas {
		count[r.Variant]++
	}
	byVariant := make(map[string][]decision.ReplicaMetrics, len(count))
	for _, r := range replicas {
		if byVariant[r.Variant] == nil {
			byVariant[r.Variant] = make([]decision.ReplicaMetrics, 0, count[r.Variant])
		}
		byVariant[r.Variant] = append(byVariant[r.Variant], r)
	}
	return byVariant
}

// supply totals the group's supply at each variant's rate per replica.
// Variants whose rate is unknown borrow the lowest known rate (the
// conservative choice: it asks for more replicas, never fewer). It returns
// that rate (+Inf when no variant has a model) and the pending replicas.
func (an *Analysis) supply(capacityPerReplica map[string]float64) (lowest float64, pending int32) {
	lowest = math.Inf(1)
	for _, va := range an.Variants {
		if va.RatePerReplica > 0 && va.RateSource != RateAssumed {
			lowest = math.Min(lowest, va.RatePerReplica)
		}
	}
	for i := range an.Variants {
		va := &an.Variants[i]
		if va.RatePerReplica <= 0 && !math.IsInf(lowest, 1) {
			va.RatePerReplica, va.RateSource = lowest, RateAssumed
		}
		pending += va.Pending
		if va.RatePerReplica > 0 {
			capacityPerReplica[va.Name] = va.RatePerReplica
			an.Supply += float64(va.Ready) * va.RatePerReplica
			an.AnticipatedSupply += float64(va.Ready+va.Pending) * va.RatePerReplica
			va.DesiredReplicas = int32(math.Ceil(va.ArrivalRate/va.RatePerReplica - 1e-9))
		}
	}
	return lowest, pending
}

// capacity sets the required and spare capacity and says why. With no model
// learned yet it asks for one replica to learn from, unless there is no load
// or a pending replica will report soon.
func (an *Analysis) capacity(g decision.Group, variants []decision.Variant, lowest float64, pending int32, capacityPerReplica map[string]float64) {
	demand := an.TotalArrivalRate
	if math.IsInf(lowest, 1) {
		switch {
		case demand <= 0 && g.SchedulerQueueSize <= 0:
			an.Why = "no load and no learned model: nothing to size"
		case pending > 0:
			an.Why = fmt.Sprintf("arrival %.3f req/s but no model learned yet; waiting for %d pending replica(s) to report", demand, pending)
		default:
			an.Why = fmt.Sprintf("arrival %.3f req/s (EPP queue %g) and no model learned for any variant: adding one replica to learn from", demand, g.SchedulerQueueSize)
			an.RequiredCapacity = 1
			for _, v := range variants {
				capacityPerReplica[v.Name] = 1
			}
		}
		return
	}
	an.RequiredCapacity = math.Max(0, demand-an.AnticipatedSupply)
	an.SpareCapacity = math.Max(0, an.Supply-demand)
	if an.AnticipatedSupply <= 0 && g.SchedulerQueueSize > 0 && an.RequiredCapacity <= 0 {
		// Requests wait in the EPP and nothing serves them.
		an.RequiredCapacity = lowest
	}
	tiny := 1e-9 * math.Max(1, math.Max(demand, an.Supply))
	if an.RequiredCapacity < tiny {
		an.RequiredCapacity = 0
	}
	if an.SpareCapacity < tiny {
		an.SpareCapacity = 0
	}
	an.Why = fmt.Sprintf("arrival %.3f req/s, supply %.3f (anticipated %.3f) at the SLO-bound rate per replica", demand, an.Supply, an.AnticipatedSupply)
	switch {
	case an.RequiredCapacity > 0:
		an.Why += fmt.Sprintf("; required %.3f req/s", an.RequiredCapacity)
	case an.SpareCapacity > 0:
		an.Why += fmt.Sprintf("; spare %.3f req/s", an.SpareCapacity)
	}
	var rates []string
	for _, va := range an.Variants {
		if va.RatePerReplica > 0 {
			rates = append(rates, fmt.Sprintf("%s %.3f (%s)", va.Name, va.RatePerReplica, va.RateSource))
		}
	}
	an.Why += "; rate per replica " + strings.Join(rates, ", ")
}

func (o *groupObs) add(r decision.ReplicaMetrics) {
	if r.ArrivalRate > 0 && decision.Finite(r.ArrivalRate) {
		o.arrival += r.ArrivalRate
		if r.AvgTTFTms > 0 && r.AvgITLms > 0 && decision.Finite(r.AvgTTFTms) && decision.Finite(r.AvgITLms) {
			o.ttft += r.ArrivalRate * r.AvgTTFTms
			o.itl += r.ArrivalRate * r.AvgITLms
			o.latArrival += r.ArrivalRate
		}
	}
	if r.AvgOutputTokens > 0 {
		w := math.Max(r.ArrivalRate, 1e-9) // arrival-weighted, equal when none
		o.in += w * r.AvgInputTokens
		o.out += w * r.AvgOutputTokens
		o.tokW += w
	}
}

func (o groupObs) workload() (Workload, bool) {
	if o.tokW <= 0 {
		return Workload{}, false
	}
	return Workload{InputTokens: o.in / o.tokW, OutputTokens: o.out / o.tokW}, true
}

// analyzeVariant follows the data flow for one variant: workload, the
// filter's observations, tuning, then targets and the rate per replica.
// buf is scratch space for the models, grown as needed.
func analyzeVariant(v decision.Variant, reps []decision.ReplicaMetrics, group groupObs, qm params.QueueingModel, tuner Tuner, st *State, buf *[]float64) VariantAnalysis {
	va := VariantAnalysis{Name: v.Name, Ready: int32(len(reps)), Pending: max(0, v.PendingReplicas), TargetSource: TargetNone}
	vs := st.Variants[v.Name]
	va.Server = serverFor(v)
	if cap(*buf) < va.Server.MaxBatch+1 {
		*buf = make([]float64, va.Server.MaxBatch+1)
	}

	sorted := append([]decision.ReplicaMetrics(nil), reps...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Pod < sorted[j].Pod })
	va.observeWorkload(sorted, group, &vs)
	if v.Role.Normalized() == decision.RolePrefill {
		st.Variants[v.Name] = vs
		va.sizePrefill(v, sorted, qm)
		return va
	}
	obs := observations(sorted)
	settling := vs.settle(v.CurrentReplicas)
	va.tune(v, obs, settling, qm, tuner, &vs, *buf)
	st.Variants[v.Name] = vs

	if vs.Tuner == nil {
		va.ParamsSource, va.RateSource = ParamsNone, RateUnknown
		return va
	}
	va.size(*vs.Tuner, group, qm, *buf)
	return va
}

// serverFor is the variant's batch and queue limits, capped so the model
// stays cheap to solve.
func serverFor(v decision.Variant) Server {
	s := Server{MaxBatch: DefaultMaxBatch}
	if v.MaxNumSeqs > 0 {
		s.MaxBatch = int(min(v.MaxNumSeqs, MaxModeledBatch))
	}
	s.MaxQueue = QueuePerBatchSlot * s.MaxBatch
	return s
}

// observeWorkload sets the variant's arrival, observed latencies and
// workload: its replicas', else the group's, else remembered in vs.
func (va *VariantAnalysis) observeWorkload(sorted []decision.ReplicaMetrics, group groupObs, vs *VariantState) {
	var own groupObs
	for _, r := range sorted {
		own.add(r)
	}
	va.ArrivalRate = own.arrival
	if ttft, itl, ok := own.latencies(); ok {
		va.ObservedTTFTms, va.ObservedITLms = ttft, itl
	}
	if w, ok := own.workload(); ok {
		va.Workload, va.WorkloadSource = w, "replicas"
	} else if w, ok := group.workload(); ok {
		va.Workload, va.WorkloadSource = w, "group"
	} else if vs.Workload != nil {
		va.Workload, va.WorkloadSource = *vs.Workload, "remembered"
	} else {
		va.WorkloadSource = "none"
	}
	if va.WorkloadSource == "replicas" || va.WorkloadSource == "group" {
		w := va.Workload
		vs.Workload = &w
	}
}

// observations are the filter's inputs, one per complete replica, in pod order.
func observations(sorted []decision.ReplicaMetrics) []Observation {
	obs := make([]Observation, 0, len(sorted))
	for _, r := range sorted {
		o := Observation{Pod: r.Pod, ArrivalRate: r.ArrivalRate, TTFTms: r.AvgTTFTms, ITLms: r.AvgITLms,
			Workload: Workload{InputTokens: r.AvgInputTokens, OutputTokens: r.AvgOutputTokens}}
		if o.Valid() {
			obs = append(obs, o)
		}
	}
	return obs
}

// settle reports whether the variant is settling: a scale-up starts the
// settle period, and it counts down every cycle.
func (vs *VariantState) settle(current int32) bool {
	if vs.LastReplicas > 0 && current > vs.LastReplicas {
		vs.SettleCycles = SettleCycles
	}
	settling := vs.SettleCycles > 0
	if vs.SettleCycles > 0 {
		vs.SettleCycles--
	}
	vs.LastReplicas = current
	return settling
}

// tune seeds the tuner from the first observation, then feeds it this
// cycle's observations unless tuning is off or the variant is in flux
// (pending replicas, settling), whose latencies would mislead the filter.
func (va *VariantAnalysis) tune(v decision.Variant, obs []Observation, settling bool, qm params.QueueingModel, tuner Tuner, vs *VariantState, buf []float64) {
	if vs.Tuner == nil && len(obs) > 0 {
		seeded := tuner.Seed(obs[0])
		vs.Tuner = &seeded
		va.Note = fmt.Sprintf("parameters seeded from %s's latencies", obs[0].Pod)
	}
	switch {
	case !qm.TuningEnabled:
		va.TuningSkipped = "tuningEnabled is false"
	case vs.Tuner == nil:
		va.TuningSkipped = "no replica reports arrival rate, TTFT, ITL and token averages"
	case len(obs) == 0:
		va.TuningSkipped = "no complete observation this cycle"
	case v.PendingReplicas > 0:
		va.TuningSkipped = fmt.Sprintf("%d replica(s) pending", v.PendingReplicas)
	case settling:
		va.TuningSkipped = "settling after a scale-up"
	default:
		ts := *vs.Tuner
		obs = obs[:min(len(obs), MaxObservationsPerCycle)]
		va.Tuning = make([]Step, len(obs))
		for i, o := range obs {
			ts, va.Tuning[i] = tuner.update(ts, o, va.Server, buf)
		}
		vs.Tuner = &ts
	}
}

// size picks the latency targets and solves the model for the highest
// arrival rate per replica that meets them.
func (va *VariantAnalysis) size(ts TunerState, group groupObs, qm params.QueueingModel, buf []float64) {
	va.Params, va.Covariance, va.ParamsStdDev, va.TunerUpdates = ts.Params, ts.Covariance, ts.StdDev(), ts.Updates
	trusted := ts.Updates >= TrustedAfter
	va.ParamsSource = ParamsSeeded
	if trusted {
		va.ParamsSource = ParamsLearned
	}
	if !va.Workload.Valid() {
		va.RateSource = RateUnknown
		va.Note = strings.TrimPrefix(va.Note+"; no workload averages to size with", "; ")
		return
	}
	va.pickTargets(ts.Params, trusted, group, qm)

	m, err := newModel(ts.Params, va.Workload, va.Server, buf)
	if err != nil {
		va.RateSource, va.Note = RateUnknown, err.Error()
		return
	}
	c, err := m.MaxRate(va.TargetTTFTms, va.TargetITLms)
	va.Capacity = &c
	if err != nil {
		// No replica count meets the targets; size for the utilization the
		// multiplier stands for (rho = 1 - 1/k) so throughput is still served.
		va.RatePerReplica = m.MaxThroughput() * (1 - 1/qm.SLOMultiplier)
		va.RateSource = RateIdleOnly
		va.Note = strings.TrimPrefix(va.Note+"; "+err.Error()+fmt.Sprintf("; sizing at utilization %.2f", 1-1/qm.SLOMultiplier), "; ")
		return
	}
	va.RatePerReplica, va.RateSource = c.MaxRate, RateModel
}

// pickTargets sets the TTFT and ITL targets: explicit, else inferred from
// trusted parameters, else the observed latencies with headroom.
func (va *VariantAnalysis) pickTargets(p Params, trusted bool, group groupObs, qm params.QueueingModel) {
	inferTTFT, inferITL := InferredTargets(p, va.Workload, qm.SLOMultiplier)
	obsTTFT, obsITL := va.ObservedTTFTms, va.ObservedITLms
	if ttft, itl, ok := group.latencies(); obsTTFT <= 0 && ok {
		obsTTFT, obsITL = ttft, itl
	}
	pick := func(explicit, inferred, observed, limit float64) (float64, string) {
		switch {
		case explicit > 0:
			return explicit, TargetExplicit
		case trusted:
			return inferred, TargetInferred
		case observed > 0:
			return math.Min(observed*FallbackHeadroom, limit), TargetFallback
		default:
			return inferred, TargetInferred
		}
	}
	var srcT, srcI string
	va.TargetTTFTms, srcT = pick(qm.TargetTTFTms, inferTTFT, obsTTFT, FallbackMaxTTFTms)
	va.TargetITLms, srcI = pick(qm.TargetITLms, inferITL, obsITL, FallbackMaxITLms)
	va.TargetSource = srcT
	if srcI != srcT {
		va.TargetSource = "ttft " + srcT + ", itl " + srcI
	}
}
