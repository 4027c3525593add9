// Package token implements the token-based saturation analyzer (formulas as
// in upstream WVA v0.9, docs/design.md#token-based-saturation). Capacity
// and demand are measured in KV-cache tokens, so variants on different hardware
// compare directly and one decision may add several replicas.
//
// The analyzer is a pure function: what it remembers between cycles (the k2
// rolling history, the capacity of variants now at zero replicas, the last
// workload averages) is the State it returns and is handed back.
package token

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
const Name = params.AnalyzerSaturationToken

// Constants of the upstream model.
const (
	// HistoryWindow is how many observed k2 values the rolling average keeps.
	HistoryWindow = 10
	// DefaultMaxNumBatchedTokens and DefaultMaxNumSeqs are vLLM's defaults
	// (chunked prefill on) for deployments that do not set the flags.
	DefaultMaxNumBatchedTokens = 8192
	DefaultMaxNumSeqs          = 256
	// BytesPerToken converts EPP queue bytes into prompt tokens.
	BytesPerToken = 4
	// Output-length buckets of the k2 history: short < 100 <= medium < 500 <= long.
	shortOutputBelow  = 100
	mediumOutputBelow = 500
)

// Where a replica's k2 came from (the priority chain, first that applies).
const (
	K2Observed   = "observed"   // queue >= queueLengthThreshold (and a filled replica, MinObservedK2Share): tokens in use now
	K2Historical = "historical" // rolling average of earlier observations
	K2Derived    = "derived"    // steady-state batching model from engine args
	K2Fallback   = "k1"         // nothing better: memory bound only
)

// Where a variant's per-replica capacity came from.
const (
	CapacityMedian     = "median-of-ready"
	CapacityRemembered = "remembered"
	CapacityDerived    = "derived-from-args"
	CapacityAssumed    = "assumed-from-other-variants"
	CapacityUnknown    = "unknown"
)

// ReplicaCapacity is one ready replica's capacity and demand, in tokens.
type ReplicaCapacity struct {
	Pod              string  `json:"pod"`
	Variant          string  `json:"variant"`
	KVCapacityTokens float64 `json:"kvCapacityTokens"`
	TokensInUse      float64 `json:"tokensInUse"`
	QueueLength      float64 `json:"queueLength"`
	K1               float64 `json:"k1"`
	K2               float64 `json:"k2"`
	K2Source         string  `json:"k2Source"`
	Capacity         float64 `json:"capacity"`
	Demand           float64 `json:"demand"`
}

// VariantCapacity aggregates one variant.
type VariantCapacity struct {
	Name               string        `json:"name"`
	Role               decision.Role `json:"role"`
	Ready              int32         `json:"ready"`
	Pending            int32         `json:"pending"`
	PerReplicaCapacity float64       `json:"perReplicaCapacity"`
	CapacitySource     string        `json:"capacitySource"`
	Supply             float64       `json:"supply"`
	AnticipatedSupply  float64       `json:"anticipatedSupply"`
	Demand             float64       `json:"demand"`
	CostPerMTokens     float64       `json:"costPerMillionTokens,omitempty"`
	// UsefulCapacity ranks the variant against the others of its group
	// (UsefulCapacity): the steady-state batch its engine args allow for
	// the group's workload; 0 when its engine args are not known.
	UsefulCapacity float64 `json:"usefulCapacity,omitempty"`
}

// Totals are the scaling quantities of the group, or of one role of a
// disaggregated group.
type Totals struct {
	Role                 decision.Role `json:"role"`
	Variants             []string      `json:"variants"`
	ReplicaDemand        float64       `json:"replicaDemand"`
	SchedulerQueueDemand float64       `json:"schedulerQueueDemand"`
	Demand               float64       `json:"demand"`
	// PeakDemand is the highest demand of the scale-down stabilization
	// window (this cycle's included); spare capacity is computed from it.
	PeakDemand        float64 `json:"peakDemand"`
	Supply            float64 `json:"supply"`
	AnticipatedSupply float64 `json:"anticipatedSupply"`
	Utilization       float64 `json:"utilization"`
	RequiredCapacity  float64 `json:"requiredCapacity"`
	// Settling says why the scale-up the demand asks for is withheld
	// (see settling); "" when none is.
	Settling      string  `json:"settling,omitempty"`
	SpareCapacity float64 `json:"spareCapacity"`
}

// Analysis is the analyzer's intermediate quantities.
type Analysis struct {
	KvCacheThreshold     float64 `json:"kvCacheThreshold"`
	QueueLengthThreshold float64 `json:"queueLengthThreshold"`
	ScaleUpThreshold     float64 `json:"scaleUpThreshold"`
	ScaleDownBoundary    float64 `json:"scaleDownBoundary"`
	// Workload averages over the replicas that report them (or remembered).
	AvgInputTokens     float64 `json:"avgInputTokens"`
	AvgOutputTokens    float64 `json:"avgOutputTokens"`
	PrefixCacheHitRate float64 `json:"prefixCacheHitRate"`
	WorkloadSource     string  `json:"workloadSource"`
	// Backlog draining (backlogDrainSeconds): AvgITLms is the mean ITL of
	// the replicas that report one, RequestSeconds how long a request holds
	// its KV cache (AvgOutputTokens x AvgITLms), BacklogWeight the share of
	// its tokens a queued request counts for (BacklogWeight).
	BacklogDrainSeconds float64 `json:"backlogDrainSeconds,omitempty"`
	AvgITLms            float64 `json:"avgITLms,omitempty"`
	RequestSeconds      float64 `json:"requestSeconds,omitempty"`
	BacklogWeight       float64 `json:"backlogWeight"`
	// EPP flow-control queue and its token demand (in + out).
	SchedulerQueueSize   float64           `json:"schedulerQueueSize"`
	SchedulerQueueBytes  float64           `json:"schedulerQueueBytes"`
	SchedulerQueueIn     float64           `json:"schedulerQueueInputTokens"`
	SchedulerQueueOut    float64           `json:"schedulerQueueOutputTokens"`
	ReplicasWithoutCache int               `json:"replicasWithoutCacheConfig"`
	Replicas             []ReplicaCapacity `json:"replicas"`
	Variants             []VariantCapacity `json:"variants"`
	Disaggregated        bool              `json:"disaggregated"`
	Roles                []Totals          `json:"roles"`
	Total                Totals            `json:"total"`
	Why                  string            `json:"why"`
}

// Summary implements analyzer.Summarizer.
func (a Analysis) Summary() []string {
	lines := []string{fmt.Sprintf("workload (%s): avg input %.1f, avg output %.1f tokens, prefix hit %.2f; EPP queue %g requests -> %.0f tokens",
		a.WorkloadSource, a.AvgInputTokens, a.AvgOutputTokens, a.PrefixCacheHitRate, a.SchedulerQueueSize, a.SchedulerQueueIn+a.SchedulerQueueOut)}
	if a.BacklogDrainSeconds > 0 {
		lines = append(lines, fmt.Sprintf("backlog drained over %gs: a request holds KV %.1f s (ITL %.1f ms), queued requests count for %.3f of their tokens",
			a.BacklogDrainSeconds, a.RequestSeconds, a.AvgITLms, a.BacklogWeight))
	}
	for _, r := range a.Replicas {
		lines = append(lines, fmt.Sprintf("  pod %s (%s): KV %.0f, in use %.0f, queue %g, k1 %.0f, k2 %.0f (%s), capacity %.0f, demand %.0f",
			r.Pod, r.Variant, r.KVCapacityTokens, r.TokensInUse, r.QueueLength, r.K1, r.K2, r.K2Source, r.Capacity, r.Demand))
	}
	for _, v := range a.Variants {
		line := fmt.Sprintf("  variant %s (%s): ready %d, pending %d, per-replica capacity %.0f (%s), supply %.0f, anticipated %.0f, demand %.0f",
			v.Name, v.Role, v.Ready, v.Pending, v.PerReplicaCapacity, v.CapacitySource, v.Supply, v.AnticipatedSupply, v.Demand)
		if v.UsefulCapacity > 0 {
			line += fmt.Sprintf(", useful capacity %.0f", v.UsefulCapacity)
		}
		lines = append(lines, line)
	}
	parts := a.Roles
	if !a.Disaggregated {
		parts = []Totals{a.Total}
	}
	for _, t := range parts {
		lines = append(lines, fmt.Sprintf("  %s: demand %.0f (replicas %.0f + EPP %.0f), supply %.0f, anticipated %.0f, utilization %.3f, required %.0f (D/%.2f - anticipated), spare %.0f (supply - D/%.2f)",
			t.Role, t.Demand, t.ReplicaDemand, t.SchedulerQueueDemand, t.Supply, t.AnticipatedSupply, t.Utilization, t.RequiredCapacity, a.ScaleUpThreshold, t.SpareCapacity, a.ScaleDownBoundary))
		if t.Settling != "" {
			lines = append(lines, "    settling: "+t.Settling)
		}
	}
	return lines
}

// State is what the analyzer remembers about one group between cycles.
type State struct {
	// Analyzer is always Name; it tells the state apart from another
	// analyzer's after a configuration change.
	Analyzer string `json:"analyzer"`
	// History holds the last HistoryWindow observed k2 values per
	// accelerator|gpusPerReplica|output bucket (the model is the group's).
	History map[string][]float64 `json:"history,omitempty"`
	// Variants remembers each variant's capacity from its last ready replicas.
	Variants map[string]VariantMemory `json:"variants,omitempty"`
	// Workload is the last workload average seen on any replica.
	Workload *Workload `json:"workload,omitempty"`
	// Demand holds the last scaleDownStabilizationCycles demands per role
	// (oldest first), for scale-down stabilization.
	Demand map[decision.Role][]float64 `json:"demand,omitempty"`
}

// VariantMemory is a variant's capacity as last measured.
type VariantMemory struct {
	PerReplicaCapacity float64 `json:"perReplicaCapacity"`
}

// Workload is the group's average request shape.
type Workload struct {
	AvgInputTokens     float64 `json:"avgInputTokens"`
	AvgOutputTokens    float64 `json:"avgOutputTokens"`
	PrefixCacheHitRate float64 `json:"prefixCacheHitRate"`
}

// clone copies the state so the caller's value is never modified, keeping
// only what concerns the group's current variants and accelerators.
func (s State) clone(g decision.Group) State {
	out := State{Analyzer: Name, History: map[string][]float64{}, Variants: map[string]VariantMemory{}}
	accels := map[string]bool{}
	for _, v := range g.Variants {
		accels[v.Accelerator] = true
		if m, ok := s.Variants[v.Name]; ok {
			out.Variants[v.Name] = m
		}
	}
	for k, h := range s.History {
		if accels[strings.SplitN(k, "|", 2)[0]] {
			out.History[k] = append([]float64(nil), h...)
		}
	}
	if s.Workload != nil {
		w := *s.Workload
		out.Workload = &w
	}
	for role, h := range s.Demand {
		if out.Demand == nil {
			out.Demand = map[decision.Role][]float64{}
		}
		out.Demand[role] = append([]float64(nil), h...)
	}
	return out
}

// Analyzer is the token-based saturation analyzer.
type Analyzer struct{}

// Name implements analyzer.Analyzer.
func (Analyzer) Name() string { return Name }

// Analyze implements analyzer.Analyzer (no memory of earlier cycles).
func (a Analyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	return a.AnalyzeState(g, cfg, nil)
}

// AnalyzeState implements analyzer.Stateful: the signal is in tokens,
// CapacityPerReplica holds each variant's per-replica capacity, Details is
// an Analysis and State the memory for the next cycle.
func (Analyzer) AnalyzeState(g decision.Group, cfg params.Resolved, prev any) (analyzer.Result, error) {
	st, ok := analyzer.DecodeState[State](prev)
	if !ok || st.Analyzer != Name {
		st = State{}
	}
	next := st.clone(g)
	a, sig := analyze(g, cfg.Scaling, &next)
	return analyzer.Result{Signal: sig, Details: a, State: next}, nil
}

// OutputBucket classifies the average output length for the k2 history.
func OutputBucket(avgOutput float64) string {
	switch {
	case avgOutput < shortOutputBelow:
		return "short"
	case avgOutput < mediumOutputBelow:
		return "medium"
	default:
		return "long"
	}
}

// DerivedK2 is the steady-state batching model of upstream WVA:
// N = min(B*O/(I+O), S), k2 = N*(I + O/2), with B = max-num-batched-tokens
// and S = max-num-seqs. It returns 0 when O <= 0.
func DerivedK2(maxBatchedTokens, maxSeqs int64, avgIn, avgOut float64) float64 {
	if avgOut <= 0 || avgIn < 0 {
		return 0
	}
	b, s := float64(maxBatchedTokens), float64(maxSeqs)
	if b <= 0 {
		b = DefaultMaxNumBatchedTokens
	}
	if s <= 0 {
		s = DefaultMaxNumSeqs
	}
	n := math.Min(b*avgOut/(avgIn+avgOut), s)
	return n * (avgIn + avgOut/2)
}

// UsefulCapacity is what one replica of v serves, for ranking it against
// the group's other variants: DerivedK2, the steady-state batch (in KV
// tokens) its engine args schedule for the workload. The KV cache says how
// much a replica can hold; max-num-seqs and max-num-batched-tokens say how
// much it is set to serve at once, which is what the operator sized for the
// hardware's speed. It is the same formula for every variant, measured or
// not. 0 when neither engine arg is known or the workload is unknown.
func UsefulCapacity(v decision.Variant, avgIn, avgOut float64) float64 {
	if v.MaxNumBatchedTokens <= 0 && v.MaxNumSeqs <= 0 {
		return 0
	}
	return DerivedK2(v.MaxNumBatchedTokens, v.MaxNumSeqs, avgIn, avgOut)
}

// SchedulerQueueDemand is the token demand of requests held in the EPP
// queue: in = max(bytes/4, size*I) * (1 - prefix hit rate), out = size*O.
func SchedulerQueueDemand(size, bytes, avgIn, avgOut, hitRate float64) (in, out float64) {
	if size <= 0 && bytes <= 0 {
		return 0, 0
	}
	in = math.Max(bytes/BytesPerToken, size*avgIn) * (1 - decision.Clamp01(hitRate))
	out = size * avgOut
	return in, out
}

// BacklogWeight is the share of its tokens a queued request counts for when
// the backlog is to be drained within drainSeconds rather than held at once.
// Draining q requests in H seconds is an extra arrival rate of q/H; each
// holds its KV cache for T = avgOut*avgITLms/1000 seconds, so by Little's law
// they occupy q*T/H requests' worth of capacity: weight min(1, T/H). It is 1
// (the whole backlog is standing demand) when drainSeconds <= 0 or T is
// unknown.
func BacklogWeight(drainSeconds, avgOut, avgITLms float64) float64 {
	if drainSeconds <= 0 || avgOut <= 0 || avgITLms <= 0 {
		return 1
	}
	return math.Min(1, avgOut*avgITLms/1000/drainSeconds)
}

// ReplicaDemand is tokens in use plus the local queue's prompt tokens, less
// the share found in the prefix cache (hitRate: cached blocks are shared and
// need no prefill), as the EPP queue's demand is discounted; a decode (or
// whole-request) replica also holds the queued requests' output.
func ReplicaDemand(tokensInUse, queue, avgIn, avgOut, hitRate float64, role decision.Role) float64 {
	in := avgIn * (1 - decision.Clamp01(hitRate))
	if role.Normalized() == decision.RolePrefill {
		return tokensInUse + queue*in
	}
	return tokensInUse + queue*(in+avgOut)
}

// Signals returns required capacity RC = max(0, D/scaleUpThreshold -
// anticipated) and spare capacity SC = max(0, supply - D/scaleDownBoundary).
func Signals(demand, supply, anticipated, scaleUpThreshold, scaleDownBoundary float64) (rc, sc float64) {
	rc = math.Max(0, demand/scaleUpThreshold-anticipated)
	sc = math.Max(0, supply-demand/scaleDownBoundary)
	// Float noise must not turn "exactly enough" into one more replica.
	tiny := 1e-9 * math.Max(1, math.Max(demand, supply))
	if rc < tiny {
		rc = 0
	}
	if sc < tiny {
		sc = 0
	}
	return rc, sc
}

// analyze runs the chain along the data flow: workload averages, then each
// replica's capacity, then each variant's, then supply, then the signal.
func analyze(g decision.Group, cfg params.Scaling, st *State) (Analysis, decision.Signal) {
	a := Analysis{
		KvCacheThreshold: cfg.KvCacheThreshold, QueueLengthThreshold: cfg.QueueLengthThreshold,
		ScaleUpThreshold: cfg.ScaleUpThreshold, ScaleDownBoundary: cfg.ScaleDownBoundary,
		SchedulerQueueSize: g.SchedulerQueueSize, SchedulerQueueBytes: g.SchedulerQueueBytes,
	}
	variants := append([]decision.Variant(nil), g.Variants...)
	sort.Slice(variants, func(i, j int) bool { return variants[i].Name < variants[j].Name })
	byName := make(map[string]decision.Variant, len(variants))
	for _, v := range variants {
		byName[v.Name] = v
		if r := v.Role.Normalized(); r != decision.RoleBoth {
			a.Disaggregated = true
		}
	}

	a.averageWorkload(g.Replicas, byName, st)
	a.averageITL(g.Replicas, byName)
	a.RequestSeconds = a.AvgOutputTokens * a.AvgITLms / 1000
	a.BacklogDrainSeconds = cfg.BacklogDrainSeconds
	a.BacklogWeight = BacklogWeight(cfg.BacklogDrainSeconds, a.AvgOutputTokens, a.AvgITLms)
	a.SchedulerQueueIn, a.SchedulerQueueOut = SchedulerQueueDemand(g.SchedulerQueueSize, g.SchedulerQueueBytes, a.AvgInputTokens, a.AvgOutputTokens, a.PrefixCacheHitRate)

	perVariant := a.replicaCapacities(g.Replicas, byName, cfg, st)
	a.variantCapacities(variants, perVariant, st)
	a.borrowCapacities()
	a.supplies(byName)

	return a, a.signal(g, cfg, st)
}

// averageWorkload averages the workload over the replicas that report it
// (upstream computeModelWorkloadAverages), else uses the last one seen.
func (a *Analysis) averageWorkload(replicas []decision.ReplicaMetrics, byName map[string]decision.Variant, st *State) {
	var n float64
	for _, r := range replicas {
		if _, ok := byName[r.Variant]; ok && (r.AvgInputTokens > 0 || r.AvgOutputTokens > 0) {
			a.AvgInputTokens += r.AvgInputTokens
			a.AvgOutputTokens += r.AvgOutputTokens
			a.PrefixCacheHitRate += decision.Clamp01(r.PrefixCacheHitRate)
			n++
		}
	}
	switch {
	case n > 0:
		a.AvgInputTokens /= n
		a.AvgOutputTokens /= n
		a.PrefixCacheHitRate /= n
		a.WorkloadSource = "replicas"
		st.Workload = &Workload{AvgInputTokens: a.AvgInputTokens, AvgOutputTokens: a.AvgOutputTokens, PrefixCacheHitRate: a.PrefixCacheHitRate}
	case st.Workload != nil:
		a.AvgInputTokens, a.AvgOutputTokens, a.PrefixCacheHitRate = st.Workload.AvgInputTokens, st.Workload.AvgOutputTokens, st.Workload.PrefixCacheHitRate
		a.WorkloadSource = "remembered"
	default:
		a.WorkloadSource = "none"
	}
}

// averageITL averages the inter-token latency over the replicas that have one.
func (a *Analysis) averageITL(replicas []decision.ReplicaMetrics, byName map[string]decision.Variant) {
	var itlN float64
	for _, r := range replicas {
		// A replica whose ITL is not a finite positive number (no token yet, a
		// broken exporter) has no ITL to average: it would poison the mean
		// and the analysis could no longer be written as JSON.
		if _, ok := byName[r.Variant]; ok && r.AvgITLms > 0 && !math.IsInf(r.AvgITLms, 0) {
			a.AvgITLms += r.AvgITLms
			itlN++
		}
	}
	if itlN > 0 {
		a.AvgITLms /= itlN
	}
}

// replicaCapacities computes each replica's capacity min(k1, k2) and demand,
// and returns them by variant for the per-variant medians.
func (a *Analysis) replicaCapacities(replicas []decision.ReplicaMetrics, byName map[string]decision.Variant, cfg params.Scaling, st *State) map[string][]ReplicaCapacity {
	perVariant := map[string][]ReplicaCapacity{}
	for _, r := range replicas {
		v, ok := byName[r.Variant]
		if !ok {
			continue
		}
		kv := r.KVCapacityTokens()
		if kv <= 0 {
			a.ReplicasWithoutCache++
			continue
		}
		in, out, hit := r.AvgInputTokens, r.AvgOutputTokens, r.PrefixCacheHitRate
		if in <= 0 {
			// No prompt served in the window: the group's workload,
			// prefix hit rate included.
			in, hit = a.AvgInputTokens, a.PrefixCacheHitRate
		}
		if out <= 0 {
			out = a.AvgOutputTokens
		}
		rc := ReplicaCapacity{Pod: r.Pod, Variant: r.Variant, KVCapacityTokens: kv, TokensInUse: r.TokensInUseOrDerived(), QueueLength: r.QueueLength}
		rc.Demand = ReplicaDemand(rc.TokensInUse, r.QueueLength*a.BacklogWeight, in, out, hit, v.Role)
		rc.K1 = kv * cfg.KvCacheThreshold
		rc.K2, rc.K2Source = st.k2(v, r.QueueLength, rc.TokensInUse, in, out, cfg.QueueLengthThreshold, rc.K1)
		if rc.K2Source == K2Fallback {
			rc.K2 = rc.K1
		}
		rc.Capacity = math.Min(rc.K1, rc.K2)
		a.Replicas = append(a.Replicas, rc)
		perVariant[v.Name] = append(perVariant[v.Name], rc)
	}
	return perVariant
}

// variantCapacities sets each variant's per-replica capacity: the median over
// ready replicas, else remembered, else derived from the variant's engine
// args and the group's workload.
func (a *Analysis) variantCapacities(variants []decision.Variant, perVariant map[string][]ReplicaCapacity, st *State) {
	for _, v := range variants {
		vc := VariantCapacity{Name: v.Name, Role: v.Role.Normalized(), Pending: max(0, v.PendingReplicas)}
		reps := perVariant[v.Name]
		vc.Ready = int32(len(reps))
		switch {
		case len(reps) > 0:
			caps := make([]float64, len(reps))
			for i, r := range reps {
				caps[i] = r.Capacity
				vc.Demand += r.Demand
			}
			vc.PerReplicaCapacity, vc.CapacitySource = decision.Median(caps), CapacityMedian
			st.Variants[v.Name] = VariantMemory{PerReplicaCapacity: vc.PerReplicaCapacity}
		case st.Variants[v.Name].PerReplicaCapacity > 0:
			vc.PerReplicaCapacity, vc.CapacitySource = st.Variants[v.Name].PerReplicaCapacity, CapacityRemembered
		case (v.MaxNumBatchedTokens > 0 || v.MaxNumSeqs > 0) && a.AvgOutputTokens > 0:
			vc.PerReplicaCapacity, vc.CapacitySource = DerivedK2(v.MaxNumBatchedTokens, v.MaxNumSeqs, a.AvgInputTokens, a.AvgOutputTokens), CapacityDerived
		default:
			vc.CapacitySource = CapacityUnknown
		}
		a.Variants = append(a.Variants, vc)
	}
}

// borrowCapacities lets a variant with nothing known borrow the median of the
// others of its role, so the optimizer can still price it (never "1 token
// per replica").
func (a *Analysis) borrowCapacities() {
	for i := range a.Variants {
		if a.Variants[i].PerReplicaCapacity > 0 {
			continue
		}
		var known []float64
		for _, o := range a.Variants {
			if o.PerReplicaCapacity > 0 && o.CapacitySource != CapacityAssumed && o.Role == a.Variants[i].Role {
				known = append(known, o.PerReplicaCapacity)
			}
		}
		if len(known) > 0 {
			a.Variants[i].PerReplicaCapacity, a.Variants[i].CapacitySource = decision.Median(known), CapacityAssumed
		}
	}
}

// supplies turns each variant's per-replica capacity into its supply now and
// once pending replicas are ready, and its price per million tokens.
func (a *Analysis) supplies(byName map[string]decision.Variant) {
	for i := range a.Variants {
		vc := &a.Variants[i]
		vc.UsefulCapacity = UsefulCapacity(byName[vc.Name], a.AvgInputTokens, a.AvgOutputTokens)
		vc.Supply = float64(vc.Ready) * vc.PerReplicaCapacity
		vc.AnticipatedSupply = float64(vc.Ready+vc.Pending) * vc.PerReplicaCapacity
		if vc.PerReplicaCapacity > 0 {
			vc.CostPerMTokens = byName[vc.Name].Cost / vc.PerReplicaCapacity * 1e6
		}
	}
}

// MinObservedK2Share: a replica with a queue but less than this share of
// the tokens it is expected to saturate at (min(k1, derived k2)) in use is
// still filling up, not saturated at that token count: typically a pod just
// Ready to which the endpoint picker releases a held backlog, which chunked
// prefill admits a few prompts per step. Taken as an observation of k2, its
// few hundred tokens would become the variant's capacity (the median of one
// replica) and the rolling history, and one such cycle would order replicas
// by the dozen. Below the share, the chain goes on to history or derivation.
const MinObservedK2Share = 0.5

func expectedK2(k1, derived float64) float64 {
	if derived > 0 {
		return math.Min(k1, derived)
	}
	return k1
}

// k2 walks the priority chain for one replica and records observations.
func (st *State) k2(v decision.Variant, queue, tokensInUse, in, out, queueThreshold, k1 float64) (float64, string) {
	key := fmt.Sprintf("%s|%d|%s", v.Accelerator, v.GPUsPerReplica, OutputBucket(out))
	derived := DerivedK2(v.MaxNumBatchedTokens, v.MaxNumSeqs, in, out)
	if queue >= queueThreshold && tokensInUse > 0 && tokensInUse >= MinObservedK2Share*expectedK2(k1, derived) {
		h := append(st.History[key], tokensInUse)
		if len(h) > HistoryWindow {
			h = h[len(h)-HistoryWindow:]
		}
		st.History[key] = h
		return tokensInUse, K2Observed
	}
	if h := st.History[key]; len(h) > 0 {
		if avg := mean(h); avg > 0 {
			return avg, K2Historical
		}
	}
	if derived > 0 {
		return derived, K2Derived
	}
	return 0, K2Fallback
}

// signal totals demand and supply (per role when disaggregated) and turns
// them into the optimizer's signal.
func (a *Analysis) signal(g decision.Group, cfg params.Scaling, st *State) decision.Signal {
	sig := decision.Signal{Analyzer: Name, Priority: cfg.Priority, CapacityPerReplica: map[string]float64{}}
	parts, pending := a.byRole(sig.CapacityPerReplica)
	sig.UsefulCapacityPerReplica = a.usefulCapacities()
	a.Total = Totals{Role: decision.RoleBoth}
	if a.Disaggregated {
		a.Total.Role = "all"
	}
	var why []string
	for _, role := range []decision.Role{decision.RoleBoth, decision.RolePrefill, decision.RoleDecode} {
		t := parts[role]
		if t == nil {
			continue
		}
		a.size(role, t, cfg, st)
		reason := a.withhold(g, t, pending[role], cfg, sig.CapacityPerReplica)
		a.Total.add(*t, a.Disaggregated)
		a.Roles = append(a.Roles, *t)
		if a.Disaggregated {
			reason = fmt.Sprintf("%s role: %s", role, reason)
			sig.Roles = append(sig.Roles, decision.RoleSignal{
				Role: role, Variants: append([]string(nil), t.Variants...),
				RequiredCapacity: t.RequiredCapacity, SpareCapacity: t.SpareCapacity,
				Reason: "token-based " + reason,
			})
		}
		why = append(why, reason)
	}
	if a.Total.Supply > 0 {
		a.Total.Utilization = a.Total.Demand / a.Total.Supply
	}
	if !a.Disaggregated {
		a.Roles = nil
	}
	a.Why = strings.Join(why, "; ")
	sig.RequiredCapacity, sig.SpareCapacity = a.Total.RequiredCapacity, a.Total.SpareCapacity
	sig.Reason = "token-based: " + a.Why
	return sig
}

// byRole sums the variants' demand and supply per role (all as RoleBoth
// unless disaggregated) and counts their pending replicas; it records each
// variant's known capacity per replica in perReplica.
func (a *Analysis) byRole(perReplica map[string]float64) (map[decision.Role]*Totals, map[decision.Role]int32) {
	parts := map[decision.Role]*Totals{}
	pending := map[decision.Role]int32{}
	for _, vc := range a.Variants {
		role := vc.Role
		if !a.Disaggregated {
			role = decision.RoleBoth
		}
		t := parts[role]
		if t == nil {
			t = &Totals{Role: role}
			parts[role] = t
		}
		t.Variants = append(t.Variants, vc.Name)
		t.ReplicaDemand += vc.Demand
		t.Supply += vc.Supply
		t.AnticipatedSupply += vc.AnticipatedSupply
		pending[role] += vc.Pending
		if vc.PerReplicaCapacity > 0 {
			perReplica[vc.Name] = vc.PerReplicaCapacity
		}
	}
	return parts, pending
}

// usefulCapacities is each variant's useful capacity per replica, nil
// unless every variant has one: it ranks variants only when all have it.
func (a *Analysis) usefulCapacities() map[string]float64 {
	useful := map[string]float64{}
	for _, vc := range a.Variants {
		if vc.UsefulCapacity > 0 {
			useful[vc.Name] = vc.UsefulCapacity
		}
	}
	if len(useful) == len(a.Variants) && len(useful) > 0 {
		return useful
	}
	return nil
}

// size adds the endpoint picker's queue to a role's demand and derives
// the capacity it requires and the capacity its peak leaves spare.
func (a *Analysis) size(role decision.Role, t *Totals, cfg params.Scaling, st *State) {
	// EPP queue: prompt tokens land on prefill, prompt and output on
	// decode (and on whole-request replicas).
	t.SchedulerQueueDemand = (a.SchedulerQueueIn + a.SchedulerQueueOut) * a.BacklogWeight
	if role == decision.RolePrefill {
		t.SchedulerQueueDemand = a.SchedulerQueueIn * a.BacklogWeight
	}
	t.Demand = t.ReplicaDemand + t.SchedulerQueueDemand
	if t.Supply > 0 {
		t.Utilization = t.Demand / t.Supply
	}
	t.PeakDemand = st.peakDemand(role, t.Demand, cfg.ScaleDownStabilizationCycles)
	t.RequiredCapacity, _ = Signals(t.Demand, t.Supply, t.AnticipatedSupply, cfg.ScaleUpThreshold, cfg.ScaleDownBoundary)
	_, t.SpareCapacity = Signals(t.PeakDemand, t.Supply, t.AnticipatedSupply, cfg.ScaleUpThreshold, cfg.ScaleDownBoundary)
}

// withhold adjusts a role's required capacity where it cannot be trusted
// yet (no capacity known, replicas settling) and returns the role's
// reason. With no capacity known and no replica pending it asks for one
// replica: the signal is then in replicas, so it sets the role's
// variants' capacity per replica to 1 in perReplica.
func (a *Analysis) withhold(g decision.Group, t *Totals, pending int32, cfg params.Scaling, perReplica map[string]float64) string {
	reason := a.describe(*t, cfg)
	if t.RequiredCapacity <= 0 {
		return reason
	}
	if !a.hasCapacity(t.Variants) {
		if pending > 0 {
			// Nothing measured yet and replicas on their way: wait for
			// them to report instead of adding more on every cycle.
			t.RequiredCapacity = 0
			return fmt.Sprintf("demand %.0f tokens but no capacity known yet; waiting for %d pending replica(s) to report", t.Demand, pending)
		}
		// No capacity knowledge at all: one replica (the signal is
		// then in units of one replica) on the cheapest variant.
		t.RequiredCapacity = 1
		for _, name := range t.Variants {
			perReplica[name] = 1
		}
		return fmt.Sprintf("demand %.0f tokens and no capacity known for any variant: adding one replica to measure it", t.Demand)
	}
	if s := a.settling(g, *t, cfg); s != "" {
		t.RequiredCapacity = 0
		t.Settling = s
		return fmt.Sprintf("demand %.0f tokens, supply %.0f; settling: %s", t.Demand, t.Supply, s)
	}
	return reason
}

// add sums a role's totals into the group's; the settling reason is the
// group's only when it has one role.
func (t *Totals) add(r Totals, disaggregated bool) {
	t.Variants = append(t.Variants, r.Variants...)
	t.ReplicaDemand += r.ReplicaDemand
	t.SchedulerQueueDemand += r.SchedulerQueueDemand
	t.Demand += r.Demand
	t.PeakDemand += r.PeakDemand
	t.Supply += r.Supply
	t.AnticipatedSupply += r.AnticipatedSupply
	t.RequiredCapacity += r.RequiredCapacity
	if r.Settling != "" && !disaggregated {
		t.Settling = r.Settling
	}
	t.SpareCapacity += r.SpareCapacity
}

// peakDemand records this cycle's demand of a role and returns the highest
// of the last `cycles` (at least this one).
func (st *State) peakDemand(role decision.Role, demand float64, cycles int) float64 {
	if cycles <= 1 {
		delete(st.Demand, role)
		return demand
	}
	if st.Demand == nil {
		st.Demand = map[decision.Role][]float64{}
	}
	h := append(st.Demand[role], demand)
	if len(h) > cycles {
		h = h[len(h)-cycles:]
	}
	st.Demand[role] = h
	peak := demand
	for _, d := range h {
		peak = math.Max(peak, d)
	}
	return peak
}

// settling withholds a role's scale-up its newest replica already answers,
// as the percentage analyzer's Settling does: for one metrics window after
// a replica turns Ready, the older replicas' tokens in use are
// max_over_time readings that still hold the load from before it served,
// the peak that asked for it. The scale-up stands when the replicas Ready
// within the window are over the scale-up threshold themselves. It reads
// only the pods' Ready times and their metrics, so a restarted adapter or
// a new leader withholds the same.
func (a *Analysis) settling(g decision.Group, t Totals, cfg params.Scaling) string {
	inRole := map[string]bool{}
	for _, n := range t.Variants {
		inRole[n] = true
	}
	recent, ok := decision.RecentlyReady(g, func(variant string) bool { return inRole[variant] })
	if !ok {
		return ""
	}
	fresh := make(map[string]bool, len(recent.Replicas))
	for _, r := range recent.Replicas {
		fresh[r.Pod] = true
	}
	var demand, capacity float64
	n := 0
	for _, rc := range a.Replicas {
		if fresh[rc.Pod] {
			demand += rc.Demand
			capacity += rc.Capacity
			n++
		}
	}
	if n == 0 || capacity <= 0 {
		return recent.NoneReporting()
	}
	if u := demand / capacity; u <= cfg.ScaleUpThreshold {
		return fmt.Sprintf("%s; the replicas Ready within it (%d) are at %.3f of their capacity, within %.2f, no scale-up",
			recent.Why(), n, u, cfg.ScaleUpThreshold)
	}
	return ""
}

func (a *Analysis) hasCapacity(names []string) bool {
	for _, vc := range a.Variants {
		for _, n := range names {
			if vc.Name == n && vc.PerReplicaCapacity > 0 {
				return true
			}
		}
	}
	return false
}

func (a *Analysis) describe(t Totals, cfg params.Scaling) string {
	head := fmt.Sprintf("demand %.0f tokens, supply %.0f (anticipated %.0f), utilization %.3f", t.Demand, t.Supply, t.AnticipatedSupply, t.Utilization)
	switch {
	case t.RequiredCapacity > 0:
		return fmt.Sprintf("%s; required %.0f tokens = %.0f/%.2f - %.0f", head, t.RequiredCapacity, t.Demand, cfg.ScaleUpThreshold, t.AnticipatedSupply)
	case t.SpareCapacity > 0:
		return fmt.Sprintf("%s; spare %.0f tokens = %.0f - %.0f/%.2f", head, t.SpareCapacity, t.Supply, t.PeakDemand, cfg.ScaleDownBoundary)
	default:
		return fmt.Sprintf("%s; within [%.2f, %.2f]", head, cfg.ScaleDownBoundary, cfg.ScaleUpThreshold)
	}
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
