// Package decision holds the plain data types that flow through the decision
// pipeline (analyze -> optimize -> enforce), and View and InventoryTarget,
// what the inventory hands the engine. It has no client or Prometheus
// dependencies (View carries the VariantAutoscaling, InventoryTarget a label
// selector) so every stage stays a pure function over these values.
package decision

import "time"

// Variant is one VariantAutoscaling of a variant group as the pipeline sees it.
type Variant struct {
	Name        string
	Accelerator string
	// Cost is the cost of one replica per unit of time (spec.variantCost).
	Cost        float64
	MinReplicas int32
	MaxReplicas int32
	// CurrentReplicas is the scale target's replica count (spec.replicas of the
	// Deployment / StatefulSet / LeaderWorkerSet).
	CurrentReplicas int32
	// PendingReplicas counts pods that exist but are not ready yet.
	PendingReplicas int32
	// DesiredReplicas is the previous decision of record; 0 means none.
	DesiredReplicas int32
	// LastUpdate is when the previous decision last changed its replica count;
	// zero on the first run.
	LastUpdate time.Time
	// GPUsPerReplica is used by the GPU limiter; 0 means unknown.
	GPUsPerReplica int32
	// MaxNumBatchedTokens and MaxNumSeqs are the vLLM engine args of the
	// variant's deployment (--max-num-batched-tokens, --max-num-seqs); 0 means
	// not set there, and the analyzers use vLLM's defaults.
	MaxNumBatchedTokens int64
	MaxNumSeqs          int64
	// Role is the variant's part in a prefill/decode disaggregated group.
	Role Role
	// StartupDelay is how long a new replica of the variant takes from
	// pod creation to Ready (image pull, model load); 0 means unknown.
	StartupDelay time.Duration
	// ScaledFromZeroAt is when the scale-from-zero fast path last woke the
	// variant (the VA's wva.llmd.ai/scaled-from-zero-at annotation); zero
	// when never. The group is not scaled back to zero within the wake grace.
	ScaledFromZeroAt time.Time
	// StartupAllowance is how long a new replica may take to become Ready
	// (from the pod template's startupProbe); 0 means unknown, and the
	// enforcer's DefaultStartupAllowance applies.
	StartupAllowance time.Duration
	// LastReadyAt is when the variant's most recently Ready pod turned
	// Ready (its Ready condition's lastTransitionTime); zero when unknown
	// or none is Ready.
	LastReadyAt time.Time
}

// MetricsWindow is the collector's max_over_time window of the saturation
// inputs (KV cache usage, queue length): a reading reflects up to this much
// of the past, including load served before the latest replica turned Ready.
const MetricsWindow = time.Minute

// RateWindow is the range of the collector's rate queries (arrivals at the
// replicas and at the gateway, TTFT, ITL): a change in demand reaches the
// analyzers no sooner than that.
const RateWindow = time.Minute

// Role is a variant's part in prefill/decode disaggregated serving.
type Role string

// Roles. The empty role is RoleBoth: the variant serves whole requests.
const (
	RoleBoth    Role = "both"
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

// Normalized maps the empty role to RoleBoth.
func (r Role) Normalized() Role {
	if r == "" {
		return RoleBoth
	}
	return r
}

// ReplicaMetrics is what one serving pod reports, already reduced over the
// collector's window (max_over_time for saturation inputs).
type ReplicaMetrics struct {
	Pod     string
	Variant string
	// KvCacheUsage is the fraction of KV cache in use, 0..1.
	KvCacheUsage float64
	// QueueLength is the number of requests waiting in the server.
	QueueLength float64

	// Token-based analyzer inputs; 0 means not reported.
	// NumGPUBlocks and BlockSize come from vllm:cache_config_info; the KV
	// capacity in tokens is their product.
	NumGPUBlocks int64
	BlockSize    int64
	// TokensInUse is the KV cache content in tokens (max over the window);
	// when 0 it is derived as KvCacheUsage * NumGPUBlocks * BlockSize.
	TokensInUse float64
	// AvgInputTokens and AvgOutputTokens are per-request averages (5m rate of
	// vllm:request_prompt_tokens / vllm:request_generation_tokens).
	AvgInputTokens  float64
	AvgOutputTokens float64
	// PrefixCacheHitRate is prefix cache hits / queries, 0..1.
	PrefixCacheHitRate float64

	// ReadyAt is when the pod turned Ready; zero when unknown. A pod Ready
	// for less than MetricsWindow reports only load it served itself.
	ReadyAt time.Time

	// Queueing-model (SLO analyzer) inputs; 0 means not reported.
	// ArrivalRate is requests per second dispatched to this pod.
	ArrivalRate float64
	// AvgTTFTms and AvgITLms are average time to first token (from arrival,
	// including queueing) and inter-token latency, in milliseconds.
	AvgTTFTms float64
	AvgITLms  float64
	// TPOT is the histogram of each finished request's time per output
	// token (vllm:request_time_per_output_token_seconds, seconds) over
	// the rate window: the share over the ITL target is the attainment
	// the SLO counts, where AvgITLms is only its mean.
	TPOT Histogram
	// QueueTime is the histogram of each request's time waiting before
	// it was first scheduled (vllm:request_queue_time_seconds).
	QueueTime Histogram
	// TTFT is the histogram of each request's time to first token
	// (vllm:time_to_first_token_seconds): the share over the TTFT target
	// is what the SLO counts, where AvgTTFTms is only its mean.
	TTFT Histogram
}

// KVCapacityTokens is the replica's KV cache capacity in tokens
// (num_gpu_blocks * block_size), 0 when unknown.
func (r ReplicaMetrics) KVCapacityTokens() float64 {
	if r.NumGPUBlocks <= 0 || r.BlockSize <= 0 {
		return 0
	}
	return float64(r.NumGPUBlocks) * float64(r.BlockSize)
}

// TokensInUseOrDerived returns TokensInUse, or KvCacheUsage times the KV
// capacity when TokensInUse is not reported.
func (r ReplicaMetrics) TokensInUseOrDerived() float64 {
	if r.TokensInUse > 0 {
		return r.TokensInUse
	}
	return r.KvCacheUsage * r.KVCapacityTokens()
}

// Group is one variant group: all VAs with the same modelID in one namespace.
type Group struct {
	ModelID   string
	Namespace string
	Variants  []Variant
	Replicas  []ReplicaMetrics
	// SchedulerQueueSize and SchedulerQueueBytes are the requests (and their
	// bytes) held in the EPP's flow-control queue for the group's pool,
	// before any model server sees them; 0 when not reported.
	SchedulerQueueSize  float64
	SchedulerQueueBytes float64
	// GatewayArrivalRate is the model's request arrival rate at the
	// gateway (the endpoint picker's request counter), in requests per
	// second, counted before flow control holds anything; meaningful only
	// when GatewayArrivalsReported.
	GatewayArrivalRate      float64
	GatewayArrivalsReported bool
	// Now is the decision time (set by the pipeline); stateful analyzers
	// age their memory by it.
	Now time.Time
}

// MetricsCount is how many replicas of the named variant report metrics.
func (g Group) MetricsCount(variant string) int32 {
	var n int32
	for _, r := range g.Replicas {
		if r.Variant == variant {
			n++
		}
	}
	return n
}

// Variant returns the variant with the given name.
func (g Group) Variant(name string) (Variant, bool) {
	for _, v := range g.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Action says how a decision relates to the current replica count.
type Action string

const (
	ActionScaleUp   Action = "scale-up"
	ActionScaleDown Action = "scale-down"
	ActionNone      Action = "none"
	// ActionBlocked marks a decision that was held because the group is in
	// transition (a previous decision is still being applied).
	ActionBlocked Action = "blocked"
)

// Target is the replica count the pipeline wants for one variant and why.
type Target struct {
	Variant  string
	Replicas int32
	Action   Action
	// Rule names the policy that decided (bounded set, for metrics labels);
	// Reason is the sentence for people.
	Rule   Rule
	Reason string
}

// Rule is the policy that produced a target.
type Rule string

// Rules of the optimizer and the enforcer.
const (
	RuleScaleUp           Rule = "scale-up"
	RuleScaleDown         Rule = "scale-down"
	RuleSteady            Rule = "steady"
	RuleNoEligibleVariant Rule = "no-eligible-variant"
	RuleClamped           Rule = "clamped"
	RuleTransitionHold    Rule = "transition-hold"
	RuleScaleToZero       Rule = "scale-to-zero"
	RuleFirstRunGrace     Rule = "first-run-grace"
	RuleKeepCheapest      Rule = "keep-cheapest"
	RuleUnreachableHold   Rule = "metrics-unreachable-hold"
	RuleLastResort        Rule = "last-resort"
	RuleRetention         Rule = "retention-expired"
	// RuleZeroBlocked marks a decision of zero overridden because requests
	// wait at the gateway or the group was just woken from zero.
	RuleZeroBlocked Rule = "scale-to-zero-blocked"
	// RuleRequestCountMissing marks a replica count held because the
	// request counter, idle detection's evidence, is missing.
	RuleRequestCountMissing Rule = "request-count-missing"
	// RuleMetricsMissing marks a replica count held because Ready pods
	// report no saturation metrics (a scraping fault, not idleness).
	RuleMetricsMissing Rule = "metrics-missing-hold"
	// RuleGPULimited marks a scale-up the GPU limiter cut or moved because
	// the accelerator budget could not satisfy every group.
	RuleGPULimited Rule = "gpu-limited"
	// RuleRetentionHold marks an optimizer decision of zero held because
	// the group is not idle over the retention period.
	RuleRetentionHold Rule = "retention-hold"
)

// ActionFor derives the action from current and target replicas.
func ActionFor(current, target int32) Action {
	switch {
	case target > current:
		return ActionScaleUp
	case target < current:
		return ActionScaleDown
	default:
		return ActionNone
	}
}

// Clamp bounds n to [lo, hi]. When lo > hi (invalid bounds that validation
// should have caught), hi wins so a decision never exceeds the maximum.
func Clamp(n, lo, hi int32) int32 {
	if n < lo {
		n = lo
	}
	if n > hi {
		n = hi
	}
	return n
}

// Cheaper is the order in which a group's variants are woken from zero and
// kept at one replica: the lowest cost first, alphabetical on a tie. The
// enforcer and the scale-from-zero fast path both use it, so either picks
// the same variant of a group.
func Cheaper(costA float64, nameA string, costB float64, nameB string) bool {
	if costA != costB {
		return costA < costB
	}
	return nameA < nameB
}
