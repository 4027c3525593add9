// Package snapshot reads a point-in-time description of one variant group
// (the input of `wva decide`), validates it, runs the decision pipeline on it
// and renders the result.
package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Snapshot is one variant group at one moment, in YAML or JSON.
type Snapshot struct {
	ModelID   string `json:"modelID"`
	Namespace string `json:"namespace"`
	// Analyzer defaults to slo-planner, the built-in default;
	// saturation-percentage, saturation-token and queueing-model select the
	// other analyzers.
	Analyzer string `json:"analyzer,omitempty"`
	// Config holds saturation settings in the ConfigMap entry format; unset
	// fields take the built-in defaults.
	Config map[string]any `json:"config,omitempty"`
	// QueueingModel holds SLO-analyzer settings in the
	// wva-queueing-model-config entry format (sloMultiplier, tuningEnabled,
	// targetTTFT, targetITL); its presence, even empty, selects the
	// queueing-model analyzer, as the ConfigMap's does.
	QueueingModel map[string]any `json:"queueingModel,omitempty"`
	// SchedulerQueue is the EPP flow-control queue of the group's pool
	// (the gateway queue): while size > 0 the group is never decided to 0.
	SchedulerQueue *SchedulerQueue `json:"schedulerQueue,omitempty"`
	// GatewayArrivalRate is the model's request arrival rate at the gateway
	// (the endpoint picker's request counter), requests per second; unset:
	// not reported, and the slo-planner reads the replicas' completions.
	GatewayArrivalRate *float64 `json:"gatewayArrivalRate,omitempty"`
	// Budget is, per accelerator, the GPUs free for new replicas; it is used
	// in limited mode (config.enableLimiter: true) and required there.
	Budget map[string]int64 `json:"budget,omitempty"`
	// State is a stateful analyzer's memory from an earlier cycle, as
	// printed in a previous output's "state" (tuner parameters and
	// covariance, k2 history, remembered capacity).
	State json.RawMessage `json:"state,omitempty"`
	// ScaleToZero holds scale-to-zero settings in the ConfigMap entry format
	// (enable_scale_to_zero, retention_period).
	ScaleToZero map[string]any `json:"scaleToZero,omitempty"`
	// Metrics is available (default), absent (no series, no Ready pod),
	// missing (no series although pods are Ready) or unreachable.
	Metrics string `json:"metrics,omitempty"`
	// Now is the decision time; default: the snapshot's latest timestamp, or
	// the Unix epoch, so the same file always decides the same way.
	Now                 *time.Time `json:"now,omitempty"`
	MetricsLastSeen     *time.Time `json:"metricsLastSeen,omitempty"`
	RequestsInRetention *float64   `json:"requestsInRetention,omitempty"`
	Variants            []Variant  `json:"variants"`
}

// Variant is one VA of the group with its pods' metrics.
type Variant struct {
	Name            string     `json:"name"`
	Accelerator     string     `json:"accelerator,omitempty"`
	Cost            *float64   `json:"cost,omitempty"`
	MinReplicas     *int32     `json:"minReplicas,omitempty"`
	MaxReplicas     *int32     `json:"maxReplicas,omitempty"`
	CurrentReplicas int32      `json:"currentReplicas"`
	DesiredReplicas int32      `json:"desiredReplicas"`
	PendingReplicas *int32     `json:"pendingReplicas,omitempty"`
	LastUpdate      *time.Time `json:"lastUpdate,omitempty"`
	// GPUsPerReplica counts against the limiter's budget (default 1).
	GPUsPerReplica *int32 `json:"gpusPerReplica,omitempty"`
	// MaxNumBatchedTokens and MaxNumSeqs are the deployment's vLLM args
	// (0: not set, vLLM defaults 8192 and 256 apply).
	MaxNumBatchedTokens int64 `json:"maxNumBatchedTokens,omitempty"`
	MaxNumSeqs          int64 `json:"maxNumSeqs,omitempty"`
	// Role is both (default), prefill or decode.
	Role string `json:"role,omitempty"`
	// ScaledFromZeroAt is when the scale-from-zero fast path woke the
	// variant (the VA's wva.llmd.ai/scaled-from-zero-at annotation).
	ScaledFromZeroAt *time.Time `json:"scaledFromZeroAt,omitempty"`
	// StartupAllowance is how long a new replica may take to become Ready
	// ("5m"; the startupProbe's allowance in the adapter); unset: the
	// enforcer's 10 minute default.
	StartupAllowance *params.Duration `json:"startupAllowance,omitempty"`
	// StartupDelay is the measured pod creation to Ready time ("4m") the
	// slo-planner plans over; unset: the configured startupDelay.
	StartupDelay *params.Duration `json:"startupDelay,omitempty"`
	Replicas     []Replica        `json:"replicas"`
}

// SchedulerQueue is what the EPP holds before any model server sees it.
type SchedulerQueue struct {
	Size  float64 `json:"size"`
	Bytes float64 `json:"bytes"`
}

// Replica is one pod reporting metrics.
type Replica struct {
	Pod          string  `json:"pod"`
	KvCacheUsage float64 `json:"kvCacheUsage"`
	QueueLength  float64 `json:"queueLength"`
	// Token-based inputs: vllm:cache_config_info and token averages.
	NumGPUBlocks       int64   `json:"numGPUBlocks,omitempty"`
	BlockSize          int64   `json:"blockSize,omitempty"`
	TokensInUse        float64 `json:"tokensInUse,omitempty"`
	AvgInputTokens     float64 `json:"avgInputTokens,omitempty"`
	AvgOutputTokens    float64 `json:"avgOutputTokens,omitempty"`
	PrefixCacheHitRate float64 `json:"prefixCacheHitRate,omitempty"`
	// Queueing-model inputs: requests per second dispatched to the pod,
	// average TTFT and ITL in milliseconds.
	ArrivalRate float64 `json:"arrivalRate,omitempty"`
	AvgTTFTms   float64 `json:"avgTTFTms,omitempty"`
	AvgITLms    float64 `json:"avgITLms,omitempty"`
}

// Defaults shared with the VariantAutoscaling CRD.
const (
	defaultMinReplicas = 1
	defaultMaxReplicas = 2
	defaultCost        = 10.0
)

// Upper bounds of the snapshot's configuration fields: far above any real
// deployment, low enough that sums and products of them stay finite. The
// metric values' bounds are decision's, shared with the collector.
const (
	maxReplicaCount = 10_000    // min/max/current/desired/pendingReplicas
	maxGPUs         = 1_000_000 // budget per accelerator
	maxGPUsPerRep   = llmdv1alpha1.MaxGPUsPerReplica
	maxCost         = llmdv1alpha1.MaxVariantCost
	maxNumSeqs      = 1e6
)

// Parse reads and validates a snapshot. Unknown fields are errors, so a typo
// never silently falls back to a default; so are a second YAML document and
// custom tags, which the decoder would otherwise drop.
func Parse(data []byte) (*Snapshot, error) {
	var s Snapshot
	if err := checkYAMLShape(data); err != nil {
		return nil, fmt.Errorf("cannot parse snapshot: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		if fields := nonFiniteFields(data); len(fields) > 0 {
			return nil, fmt.Errorf("cannot parse snapshot: %s", strings.Join(fields, "; "))
		}
		return nil, fmt.Errorf("cannot parse snapshot: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports every problem, each naming its field.
func (s *Snapshot) Validate() error {
	var p problems
	s.validateTop(&p)
	seen := map[string]int{}
	pods := map[string]string{}
	for i, v := range s.Variants {
		at := fmt.Sprintf("variants[%d]", i)
		if v.Name == "" {
			p.bad(at+".name", "required")
		} else if j, dup := seen[v.Name]; dup {
			p.bad(at+".name", "duplicate variant %s (also variants[%d])", QuotedName(v.Name), j)
		} else {
			seen[v.Name] = i
		}
		v.validate(&p, at)
		for k, r := range v.Replicas {
			rat := fmt.Sprintf("%s.replicas[%d]", at, k)
			if r.Pod == "" {
				p.bad(rat+".pod", "required")
			} else if other, dup := pods[r.Pod]; dup {
				p.bad(rat+".pod", "duplicate pod %s (also in %s)", QuotedName(r.Pod), other)
			} else {
				pods[r.Pod] = rat
			}
			r.validate(&p, rat)
		}
	}
	if cfg, err := s.resolveConfig(); err != nil {
		p.errs = append(p.errs, err)
	} else if len(s.Budget) > 0 && !cfg.Scaling.EnableLimiter {
		p.bad("budget", "applies only in limited mode: set config.enableLimiter: true")
	}
	return errors.Join(p.errs...)
}

// problems collects Validate's findings so that all are reported at once.
type problems struct{ errs []error }

func (p *problems) bad(field string, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

func (p *problems) inRange(field string, v, hi float64) {
	if !decision.Finite(v) || v < 0 || v > hi {
		p.bad(field, "%v must be a finite number in [0, %g]", v, hi)
	}
}

func (p *problems) intRange(field string, v, lo, hi int64) {
	if v < lo || v > hi {
		p.bad(field, "%d must be in [%d, %d]", v, lo, hi)
	}
}

// validateTop checks the snapshot's own fields, before its variants.
func (s *Snapshot) validateTop(p *problems) {
	if s.ModelID == "" {
		p.bad("modelID", "required")
	}
	switch s.Metrics {
	case "", string(decide.MetricsAvailable), string(decide.MetricsAbsent), string(decide.MetricsMissing), string(decide.MetricsUnreachable):
	default:
		p.bad("metrics", "%s is not one of available, absent, missing, unreachable", QuotedName(s.Metrics))
	}
	if s.RequestsInRetention != nil {
		p.inRange("requestsInRetention", *s.RequestsInRetention, decision.MaxRequestCount)
	}
	if len(s.Variants) == 0 {
		p.bad("variants", "at least one variant is required")
	}
	if s.GatewayArrivalRate != nil {
		p.inRange("gatewayArrivalRate", *s.GatewayArrivalRate, decision.MaxArrivalRate)
	}
	if q := s.SchedulerQueue; q != nil {
		p.inRange("schedulerQueue.size", q.Size, decision.MaxSchedulerQueue)
		p.inRange("schedulerQueue.bytes", q.Bytes, decision.MaxSchedulerQueueBytes)
	}
	for acc, n := range s.Budget {
		p.intRange("budget."+acc, n, 0, maxGPUs)
	}
	if len(s.State) > 0 {
		var v map[string]any
		if err := json.Unmarshal(s.State, &v); err != nil {
			p.bad("state", "must be an object, as printed in a previous output's state: %v", err)
		}
	}
}

// validate checks one variant's fields (not its name, whose uniqueness
// Validate checks across variants, nor its replicas).
func (v Variant) validate(p *problems, at string) {
	if v.Cost != nil {
		p.inRange(at+".cost", *v.Cost, maxCost)
	}
	lo, hi := v.bounds()
	p.intRange(at+".minReplicas", int64(lo), 0, maxReplicaCount)
	p.intRange(at+".maxReplicas", int64(hi), 1, maxReplicaCount)
	if lo > hi {
		p.bad(at+".minReplicas", "%d is greater than maxReplicas %d", lo, hi)
	}
	p.intRange(at+".currentReplicas", int64(v.CurrentReplicas), 0, maxReplicaCount)
	p.intRange(at+".desiredReplicas", int64(v.DesiredReplicas), 0, maxReplicaCount)
	if v.PendingReplicas != nil {
		p.intRange(at+".pendingReplicas", int64(*v.PendingReplicas), 0, maxReplicaCount)
		if *v.PendingReplicas > v.CurrentReplicas {
			p.bad(at+".pendingReplicas", "%d is greater than currentReplicas %d: pending replicas are among the current ones",
				*v.PendingReplicas, v.CurrentReplicas)
		}
	}
	if v.CurrentReplicas == 0 && len(v.Replicas) > 0 {
		p.bad(at+".replicas", "%d pods report metrics but currentReplicas is 0: list no replicas, or set currentReplicas", len(v.Replicas))
	}
	if v.GPUsPerReplica != nil {
		p.intRange(at+".gpusPerReplica", int64(*v.GPUsPerReplica), 1, maxGPUsPerRep)
	}
	if v.StartupAllowance != nil && *v.StartupAllowance < 0 {
		p.bad(at+".startupAllowance", "%s must be a duration >= 0 such as \"5m\"", *v.StartupAllowance)
	}
	if v.StartupDelay != nil && (*v.StartupDelay < 0 || v.StartupDelay.D() > 2*time.Hour) {
		p.bad(at+".startupDelay", "%s must be a duration in [0, 2h] such as \"4m\"", *v.StartupDelay)
	}
	p.intRange(at+".maxNumBatchedTokens", v.MaxNumBatchedTokens, 0, decision.MaxTokens)
	p.intRange(at+".maxNumSeqs", v.MaxNumSeqs, 0, maxNumSeqs)
	switch decision.Role(v.Role) {
	case "", decision.RoleBoth, decision.RolePrefill, decision.RoleDecode:
	default:
		p.bad(at+".role", "%s is not one of both, prefill, decode", QuotedName(string(v.Role)))
	}
}

// validate checks one replica's figures (not its pod, whose uniqueness
// Validate checks across variants).
func (r Replica) validate(p *problems, rat string) {
	if !decision.Finite(r.KvCacheUsage) || r.KvCacheUsage < 0 || r.KvCacheUsage > 1 {
		p.bad(rat+".kvCacheUsage", "%v is outside [0, 1]", r.KvCacheUsage)
	}
	p.inRange(rat+".queueLength", r.QueueLength, decision.MaxQueueLength)
	p.intRange(rat+".numGPUBlocks", r.NumGPUBlocks, 0, decision.MaxGPUBlocks)
	p.intRange(rat+".blockSize", r.BlockSize, 0, decision.MaxBlockSize)
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"tokensInUse", r.TokensInUse, decision.MaxTokens}, {"avgInputTokens", r.AvgInputTokens, decision.MaxTokens},
		{"avgOutputTokens", r.AvgOutputTokens, decision.MaxTokens}, {"arrivalRate", r.ArrivalRate, decision.MaxArrivalRate},
		{"avgTTFTms", r.AvgTTFTms, decision.MaxLatencyMs}, {"avgITLms", r.AvgITLms, decision.MaxLatencyMs}} {
		p.inRange(rat+"."+f.name, f.v, f.max)
	}
	if !decision.Finite(r.PrefixCacheHitRate) || r.PrefixCacheHitRate < 0 || r.PrefixCacheHitRate > 1 {
		p.bad(rat+".prefixCacheHitRate", "%v is outside [0, 1]", r.PrefixCacheHitRate)
	}
}

func (v Variant) bounds() (int32, int32) {
	lo, hi := int32(defaultMinReplicas), int32(defaultMaxReplicas)
	if v.MinReplicas != nil {
		lo = *v.MinReplicas
	}
	if v.MaxReplicas != nil {
		hi = *v.MaxReplicas
	}
	return lo, hi
}

// resolveConfig feeds the snapshot's settings through the same ConfigMap
// parser and validation the adapter uses, as the "default" entries.
func (s *Snapshot) resolveConfig() (params.Resolved, error) {
	store := config.NewStore()
	sat := map[string]any{}
	for k, v := range s.Config {
		sat[k] = v
	}
	if s.Analyzer != "" {
		if prev, ok := sat["analyzerName"]; ok && prev != s.Analyzer {
			return params.Resolved{}, fmt.Errorf("analyzer: %s conflicts with config.analyzerName %s", QuotedName(s.Analyzer), QuotedName(fmt.Sprint(prev)))
		}
		sat["analyzerName"] = s.Analyzer
	}
	if s.QueueingModel != nil {
		if name, ok := sat["analyzerName"].(string); ok && config.NormalizeAnalyzerName(name) != params.AnalyzerQueueingModel {
			return params.Resolved{}, fmt.Errorf("queueingModel: selects the %s analyzer, but the snapshot asks for %s", params.AnalyzerQueueingModel, QuotedName(name))
		}
	}
	var errs []error
	entries := map[string]map[string]any{config.SaturationConfigMapName: sat, config.ScaleToZeroConfigMapName: s.ScaleToZero}
	for name, entry := range entries {
		if len(entry) == 0 {
			continue
		}
		text, err := yaml.Marshal(entry)
		if err != nil {
			return params.Resolved{}, err
		}
		if err := store.Apply(name, map[string]string{config.DefaultKey: string(text)}); err != nil {
			errs = append(errs, err)
		}
	}
	if s.QueueingModel != nil {
		// Present, even empty: the ConfigMap's default entry exists.
		text, err := yaml.Marshal(s.QueueingModel)
		if err != nil {
			return params.Resolved{}, err
		}
		if err := store.Apply(config.QueueingModelConfigMapName, map[string]string{config.DefaultKey: string(text)}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return params.Resolved{}, errors.Join(errs...)
	}
	return store.Resolve(s.ModelID, s.Namespace), nil
}

// Input converts a validated snapshot into the pipeline's input and the
// decision time.
func (s *Snapshot) Input() (decide.GroupInput, time.Time, error) {
	cfg, err := s.resolveConfig()
	if err != nil {
		return decide.GroupInput{}, time.Time{}, err
	}
	in := decide.GroupInput{
		Config:              cfg,
		Metrics:             decide.MetricsAvailable,
		RequestsInRetention: s.RequestsInRetention,
		Group:               decision.Group{ModelID: s.ModelID, Namespace: s.Namespace},
	}
	if q := s.SchedulerQueue; q != nil {
		in.Group.SchedulerQueueSize, in.Group.SchedulerQueueBytes = q.Size, q.Bytes
	}
	if r := s.GatewayArrivalRate; r != nil {
		in.Group.GatewayArrivalRate, in.Group.GatewayArrivalsReported = *r, true
	}
	if len(s.State) > 0 {
		in.State = s.State
	}
	if s.Metrics != "" {
		in.Metrics = decide.MetricsState(s.Metrics)
	}
	if s.MetricsLastSeen != nil {
		in.MetricsLastSeen = *s.MetricsLastSeen
	}
	now := time.Unix(0, 0).UTC()
	for _, v := range s.Variants {
		lo, hi := v.bounds()
		dv := decision.Variant{
			Name: v.Name, Accelerator: v.Accelerator, Cost: defaultCost,
			MinReplicas: lo, MaxReplicas: hi,
			CurrentReplicas: v.CurrentReplicas, DesiredReplicas: v.DesiredReplicas,
			PendingReplicas:     max(0, v.CurrentReplicas-int32(len(v.Replicas))),
			MaxNumBatchedTokens: v.MaxNumBatchedTokens, MaxNumSeqs: v.MaxNumSeqs,
			Role: decision.Role(v.Role).Normalized(),
		}
		if v.GPUsPerReplica != nil {
			dv.GPUsPerReplica = *v.GPUsPerReplica
		}
		if v.Cost != nil {
			dv.Cost = *v.Cost
		}
		if v.PendingReplicas != nil {
			dv.PendingReplicas = *v.PendingReplicas
		}
		if v.LastUpdate != nil {
			dv.LastUpdate = *v.LastUpdate
			if dv.LastUpdate.After(now) {
				now = dv.LastUpdate
			}
		}
		if v.ScaledFromZeroAt != nil {
			dv.ScaledFromZeroAt = *v.ScaledFromZeroAt
			if dv.ScaledFromZeroAt.After(now) {
				now = dv.ScaledFromZeroAt
			}
		}
		if v.StartupAllowance != nil {
			dv.StartupAllowance = v.StartupAllowance.D()
		}
		if v.StartupDelay != nil {
			dv.StartupDelay = v.StartupDelay.D()
		}
		in.Group.Variants = append(in.Group.Variants, dv)
		for _, r := range v.Replicas {
			in.Group.Replicas = append(in.Group.Replicas, decision.ReplicaMetrics{
				Pod: r.Pod, Variant: v.Name, KvCacheUsage: r.KvCacheUsage, QueueLength: r.QueueLength,
				NumGPUBlocks: r.NumGPUBlocks, BlockSize: r.BlockSize, TokensInUse: r.TokensInUse,
				AvgInputTokens: r.AvgInputTokens, AvgOutputTokens: r.AvgOutputTokens, PrefixCacheHitRate: r.PrefixCacheHitRate,
				ArrivalRate: r.ArrivalRate, AvgTTFTms: r.AvgTTFTms, AvgITLms: r.AvgITLms,
			})
		}
	}
	if in.MetricsLastSeen.After(now) {
		now = in.MetricsLastSeen
	}
	if s.Now != nil {
		now = *s.Now
	}
	return in, now, nil
}
