package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/decision/params"
)

// FieldError names the field, the value and what would be accepted.
type FieldError struct {
	Field  string
	Value  any
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s=%v: %s", e.Field, e.Value, e.Reason)
}

// scope is the model/namespace an entry declares with the upstream
// model_id/namespace fields.
type scope struct {
	ModelID   string
	Namespace string
}

// saturationEntry is one entry as written; nil fields inherit.
type saturationEntry struct {
	ModelID              *string  `json:"model_id,omitempty"`
	Namespace            *string  `json:"namespace,omitempty"`
	AnalyzerName         *string  `json:"analyzerName,omitempty"`
	KvCacheThreshold     *float64 `json:"kvCacheThreshold,omitempty"`
	QueueLengthThreshold *float64 `json:"queueLengthThreshold,omitempty"`
	KvSpareTrigger       *float64 `json:"kvSpareTrigger,omitempty"`
	QueueSpareTrigger    *float64 `json:"queueSpareTrigger,omitempty"`
	ScaleUpThreshold     *float64 `json:"scaleUpThreshold,omitempty"`
	ScaleDownBoundary    *float64 `json:"scaleDownBoundary,omitempty"`
	// ScaleDownStabilizationCycles: see params.Scaling.
	ScaleDownStabilizationCycles *int `json:"scaleDownStabilizationCycles,omitempty"`
	// BacklogDrainSeconds: see params.Scaling.
	BacklogDrainSeconds *float64 `json:"backlogDrainSeconds,omitempty"`
	EnableLimiter       *bool    `json:"enableLimiter,omitempty"`
	Priority            *float64 `json:"priority,omitempty"`
	// The slo-planner's objective: see params.SLO.
	TargetTTFTms *float64         `json:"targetTTFT,omitempty"`
	TargetITLms  *float64         `json:"targetITL,omitempty"`
	Attainment   *float64         `json:"sloAttainment,omitempty"`
	StartupDelay *params.Duration `json:"startupDelay,omitempty"`
}

func (e saturationEntry) scope() scope { return scopeOf(e.ModelID, e.Namespace) }

func (e saturationEntry) over(base saturation) saturation {
	set(&base.AnalyzerName, e.AnalyzerName)
	set(&base.KvCacheThreshold, e.KvCacheThreshold)
	set(&base.QueueLengthThreshold, e.QueueLengthThreshold)
	set(&base.KvSpareTrigger, e.KvSpareTrigger)
	set(&base.QueueSpareTrigger, e.QueueSpareTrigger)
	set(&base.ScaleUpThreshold, e.ScaleUpThreshold)
	set(&base.ScaleDownBoundary, e.ScaleDownBoundary)
	set(&base.ScaleDownStabilizationCycles, e.ScaleDownStabilizationCycles)
	set(&base.BacklogDrainSeconds, e.BacklogDrainSeconds)
	set(&base.EnableLimiter, e.EnableLimiter)
	set(&base.Priority, e.Priority)
	set(&base.SLO.TargetTTFTms, e.TargetTTFTms)
	set(&base.SLO.TargetITLms, e.TargetITLms)
	set(&base.SLO.Attainment, e.Attainment)
	set(&base.SLO.StartupDelay, e.StartupDelay)
	base.AnalyzerName = NormalizeAnalyzerName(base.AnalyzerName)
	return base
}

// NormalizeAnalyzerName maps upstream spellings to wva's names: "" is the
// built-in default (the slo-planner; upstream's empty name meant the
// percentage analyzer, which must now be named) and upstream's "saturation"
// is the token-based one.
func NormalizeAnalyzerName(name string) string {
	switch strings.TrimSpace(name) {
	case "":
		return params.DefaultScaling().AnalyzerName
	case "saturation-percentage", "saturation-percentage-based":
		return params.AnalyzerSaturationPercentage
	case "saturation", "saturation-token", "saturation-token-based":
		return params.AnalyzerSaturationToken
	case "queueing-model", "slo":
		return params.AnalyzerQueueingModel
	case "slo-planner", "planner":
		return params.AnalyzerSLOPlanner
	default:
		return name
	}
}

// MaxScaleDownStabilizationCycles bounds the token analyzer's demand memory
// (an hour at the upstream 15 s engine interval).
const MaxScaleDownStabilizationCycles = 240

// MaxQueueLengthThreshold bounds queueLengthThreshold: requests waiting at
// one replica (the default is 5).
const MaxQueueLengthThreshold = 1_000_000

// Validate checks ranges and the relations between thresholds and triggers.
func (s saturation) Validate() error {
	checks := []struct {
		field string
		value float64
		ok    bool
		want  string
	}{
		{"kvCacheThreshold", s.KvCacheThreshold, s.KvCacheThreshold > 0 && s.KvCacheThreshold <= 1, "must be in (0, 1]"},
		// Bounded so queue spare sums stay finite (1e308 overflowed to +Inf).
		{"queueLengthThreshold", s.QueueLengthThreshold, s.QueueLengthThreshold > 0 && s.QueueLengthThreshold <= MaxQueueLengthThreshold,
			fmt.Sprintf("must be in (0, %g]", float64(MaxQueueLengthThreshold))},
		{"kvSpareTrigger", s.KvSpareTrigger, s.KvSpareTrigger >= 0 && s.KvSpareTrigger < s.KvCacheThreshold,
			fmt.Sprintf("must be in [0, kvCacheThreshold=%g)", s.KvCacheThreshold)},
		{"queueSpareTrigger", s.QueueSpareTrigger, s.QueueSpareTrigger >= 0 && s.QueueSpareTrigger < s.QueueLengthThreshold,
			fmt.Sprintf("must be in [0, queueLengthThreshold=%g)", s.QueueLengthThreshold)},
		{"scaleUpThreshold", s.ScaleUpThreshold, s.ScaleUpThreshold > 0 && s.ScaleUpThreshold <= 1, "must be in (0, 1]"},
		{"scaleDownBoundary", s.ScaleDownBoundary, s.ScaleDownBoundary > 0 && s.ScaleDownBoundary < s.ScaleUpThreshold,
			fmt.Sprintf("must be in (0, scaleUpThreshold=%g)", s.ScaleUpThreshold)},
		{"priority", s.Priority, s.Priority > 0, "must be > 0"},
		{"backlogDrainSeconds", s.BacklogDrainSeconds, s.BacklogDrainSeconds >= 0, "must be >= 0 (0: the whole backlog is standing demand)"},
		{"targetTTFT", s.SLO.TargetTTFTms, s.SLO.TargetTTFTms > 0, "must be a number of milliseconds > 0"},
		{"targetITL", s.SLO.TargetITLms, s.SLO.TargetITLms > 0, "must be a number of milliseconds > 0"},
		{"sloAttainment", s.SLO.Attainment, s.SLO.Attainment >= 0.5 && s.SLO.Attainment <= 0.9999, "must be in [0.5, 0.9999]"},
		{"startupDelay", s.SLO.StartupDelay.D().Seconds(), s.SLO.StartupDelay >= 0 && s.SLO.StartupDelay.D() <= 2*time.Hour, "must be a duration in [0, 2h]"},
	}
	for _, c := range checks {
		if math.IsNaN(c.value) || math.IsInf(c.value, 0) {
			return &FieldError{Field: c.field, Value: c.value, Reason: "must be a finite number"}
		}
		if !c.ok {
			return &FieldError{Field: c.field, Value: c.value, Reason: c.want}
		}
	}
	if c := s.ScaleDownStabilizationCycles; c < 0 || c > MaxScaleDownStabilizationCycles {
		return &FieldError{Field: "scaleDownStabilizationCycles", Value: c,
			Reason: fmt.Sprintf("must be in [0, %d]", MaxScaleDownStabilizationCycles)}
	}
	switch s.AnalyzerName {
	case params.AnalyzerSaturationPercentage, params.AnalyzerSaturationToken, params.AnalyzerQueueingModel, params.AnalyzerSLOPlanner:
	default:
		return &FieldError{Field: "analyzerName", Value: s.AnalyzerName, Reason: fmt.Sprintf(
			"must be one of %q, %q (or \"saturation\"), %q, %q (or \"\")",
			params.AnalyzerSaturationPercentage, params.AnalyzerSaturationToken, params.AnalyzerQueueingModel, params.AnalyzerSLOPlanner)}
	}
	return nil
}

type scaleToZeroEntry struct {
	ModelID         *string          `json:"model_id,omitempty"`
	Namespace       *string          `json:"namespace,omitempty"`
	Enabled         *bool            `json:"enable_scale_to_zero,omitempty"`
	RetentionPeriod *params.Duration `json:"retention_period,omitempty"`
}

func (e scaleToZeroEntry) scope() scope { return scopeOf(e.ModelID, e.Namespace) }

func (e scaleToZeroEntry) over(base scaleToZero) scaleToZero {
	set(&base.Enabled, e.Enabled)
	set(&base.RetentionPeriod, e.RetentionPeriod)
	return base
}

// MaxScrapeInterval is the longest vLLM scrape interval wva's queries are
// sized for. The adapter is not told the real one; the collector's rate
// window (collector.RateWindow, 1m) is two scrapes at it.
const MaxScrapeInterval = 30 * time.Second

// MinRetentionScrapes is how many scrapes of the request counter the
// retention period must span at least: increase() over fewer returns no
// sample, and a missing count must never read as idleness.
const MinRetentionScrapes = 2

// MinRetentionPeriod is the shortest retention_period accepted: several
// scrapes at MaxScrapeInterval, the collector's rate window (a test keeps
// them equal). Anything shorter would also scale a model to zero between
// two bursts of a bursty workload.
const MinRetentionPeriod = MinRetentionScrapes * MaxScrapeInterval

// Validate requires a retention period of at least MinRetentionPeriod.
func (s scaleToZero) Validate() error {
	if s.RetentionPeriod.D() < MinRetentionPeriod {
		return &FieldError{Field: "retention_period", Value: s.RetentionPeriod.String(),
			Reason: fmt.Sprintf("must be a duration of at least %s such as \"10m\": idle detection counts requests with increase() over it, "+
				"which needs %d scrapes at a scrape interval of up to %s (the collector's rate window)", MinRetentionPeriod, MinRetentionScrapes, MaxScrapeInterval)}
	}
	return nil
}

type queueingModelEntry struct {
	ModelID       *string  `json:"model_id,omitempty"`
	Namespace     *string  `json:"namespace,omitempty"`
	SLOMultiplier *float64 `json:"sloMultiplier,omitempty"`
	TuningEnabled *bool    `json:"tuningEnabled,omitempty"`
	TargetTTFTms  *float64 `json:"targetTTFT,omitempty"`
	TargetITLms   *float64 `json:"targetITL,omitempty"`
}

func (e queueingModelEntry) scope() scope { return scopeOf(e.ModelID, e.Namespace) }

func (e queueingModelEntry) over(base queueingModel) queueingModel {
	set(&base.SLOMultiplier, e.SLOMultiplier)
	set(&base.TuningEnabled, e.TuningEnabled)
	set(&base.TargetTTFTms, e.TargetTTFTms)
	set(&base.TargetITLms, e.TargetITLms)
	return base
}

// Validate requires k > 1 (target utilisation 1-1/k must be positive) and
// non-negative targets (0 = infer).
func (q queueingModel) Validate() error {
	if math.IsNaN(q.SLOMultiplier) || q.SLOMultiplier <= 1 || math.IsInf(q.SLOMultiplier, 0) {
		return &FieldError{Field: "sloMultiplier", Value: q.SLOMultiplier, Reason: "must be a finite number > 1"}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"targetTTFT", q.TargetTTFTms}, {"targetITL", q.TargetITLms}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return &FieldError{Field: f.name, Value: f.v, Reason: "must be a finite number of milliseconds >= 0 (0 = infer)"}
		}
	}
	return nil
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func scopeOf(modelID, namespace *string) scope {
	var s scope
	if modelID != nil {
		s.ModelID = *modelID
	}
	if namespace != nil {
		s.Namespace = *namespace
	}
	return s
}
