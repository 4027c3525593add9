// Package params holds the resolved parameters the decision path takes:
// plain values, with no Kubernetes or ConfigMap dependency. pkg/config
// parses and validates wva's ConfigMaps and resolves them into Resolved.
package params

import (
	"encoding/json"
	"fmt"
	"time"
)

// Analyzer names accepted in analyzerName.
const (
	AnalyzerSaturationPercentage = "saturation-percentage"
	AnalyzerSaturationToken      = "saturation-token"
	AnalyzerQueueingModel        = "queueing-model"
	AnalyzerSLOPlanner           = "slo-planner"
)

// Resolved is the configuration in force for one variant group, with the
// entry each part came from (for logs and decision reasons).
type Resolved struct {
	Scaling Scaling
	SLO     SLO
	// SaturationSource is the wva-saturation-scaling-config entry Scaling
	// and SLO came from.
	SaturationSource  string
	ScaleToZero       ScaleToZero
	ScaleToZeroSource string
	// QueueingModel is nil unless wva-queueing-model-config has an entry
	// that applies to the group; its presence selects the SLO analyzer.
	QueueingModel       *QueueingModel
	QueueingModelSource string
}

// Defaults is the configuration in force without any ConfigMap entry.
func Defaults() Resolved {
	return Resolved{Scaling: DefaultScaling(), SLO: DefaultSLO(), ScaleToZero: DefaultScaleToZero()}
}

// Analyzer is the analyzer the group runs: the SLO analyzer when the
// queueing-model ConfigMap applies, else analyzerName.
func (r Resolved) Analyzer() string {
	if r.QueueingModel != nil {
		return AnalyzerQueueingModel
	}
	return r.Scaling.AnalyzerName
}

// Scaling is how a group is scaled apart from its SLO: which analyzer runs,
// the saturation and token analyzers' thresholds, the limiter and the
// group's priority (the saturation-scaling ConfigMap's other keys).
type Scaling struct {
	AnalyzerName         string
	KvCacheThreshold     float64
	QueueLengthThreshold float64
	KvSpareTrigger       float64
	QueueSpareTrigger    float64
	ScaleUpThreshold     float64
	ScaleDownBoundary    float64
	// ScaleDownStabilizationCycles (token-based analyzer): spare capacity
	// is computed from the highest demand of the last this many engine
	// cycles, the current one included, so a dip right after a burst does
	// not release replicas the next burst needs. 0 or 1: the current
	// demand only.
	ScaleDownStabilizationCycles int
	// BacklogDrainSeconds (token-based analyzer): queued requests (in the
	// model servers and at the EPP) are demand to drain within this many
	// seconds, not to hold all at once. A queued request then counts for
	// min(1, T/BacklogDrainSeconds) of its tokens, T being how long a
	// request holds its KV cache (average output tokens x average ITL):
	// capacity that serves the backlog's requests at the rate that empties
	// the queue in BacklogDrainSeconds. 0 (the built-in default, upstream's
	// behavior): the whole backlog counts as standing demand. A natural
	// value is the pods' start-up time: capacity ordered now serves from then.
	BacklogDrainSeconds float64
	EnableLimiter       bool
	Priority            float64
}

// SLO is a latency objective: Attainment of requests must see a time to
// first token within TargetTTFTms and a mean inter-token latency within
// TargetITLms. It is what the slo-planner analyzer plans for: the only
// knob it has.
type SLO struct {
	TargetTTFTms float64
	TargetITLms  float64
	Attainment   float64
	// StartupDelay is a variant's start-up time (pod creation to Ready)
	// used where none has been measured.
	StartupDelay Duration
}

// ScaleToZero is the resolved scale-to-zero configuration of one group.
type ScaleToZero struct {
	Enabled         bool
	RetentionPeriod Duration
}

// QueueingModel is the resolved SLO-analyzer configuration of one group.
// Targets of 0 mean "infer from the learned model".
type QueueingModel struct {
	SLOMultiplier float64
	TuningEnabled bool
	TargetTTFTms  float64
	TargetITLms   float64
}

// DefaultSLO is an interactive chat objective: 2 s to the first token and
// 100 ms per token for 99% of requests; start-up 5 minutes until measured.
func DefaultSLO() SLO {
	return SLO{TargetTTFTms: 2000, TargetITLms: 100, Attainment: 0.99, StartupDelay: Duration(5 * time.Minute)}
}

// DefaultScaling is the built-in default for every field no ConfigMap entry
// sets. The analyzer is the slo-planner; the thresholds are the design
// notes' recommended values for the analyzers that read them (selected by
// name), so a missing ConfigMap never makes every replica look saturated
// (upstream's zero-value pitfall).
func DefaultScaling() Scaling {
	return Scaling{
		AnalyzerName:         AnalyzerSLOPlanner,
		KvCacheThreshold:     0.80,
		QueueLengthThreshold: 5,
		KvSpareTrigger:       0.10,
		QueueSpareTrigger:    3,
		ScaleUpThreshold:     0.85,
		ScaleDownBoundary:    0.70,
		Priority:             1.0,
	}
}

// DefaultScaleToZero is off, with the design notes' 10 minute retention.
func DefaultScaleToZero() ScaleToZero {
	return ScaleToZero{RetentionPeriod: Duration(10 * time.Minute)}
}

// DefaultQueueingModel infers targets with k = 3 (target utilisation ~0.67).
func DefaultQueueingModel() QueueingModel {
	return QueueingModel{SLOMultiplier: 3.0, TuningEnabled: true}
}

// Duration is a time.Duration written as a Go duration string ("10m") in
// YAML/JSON.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "10m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a duration string ("90s", "10m").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"10m\", got %s", string(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"10m\", got %q", s)
	}
	*d = Duration(v)
	return nil
}
