// Package snapshot reads a point-in-time description of one variant group
// (the input of `wva decide`), validates it, runs the decision pipeline on it
// and renders the result.
package snapshot

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/enforcer"
	"github.com/wva-project/wva/pkg/pipeline"
)

// Snapshot is one variant group at one moment, in YAML or JSON.
type Snapshot struct {
	ModelID   string `json:"modelID"`
	Namespace string `json:"namespace"`
	// Analyzer defaults to saturation-percentage.
	Analyzer string `json:"analyzer,omitempty"`
	// Config holds saturation settings in the ConfigMap entry format; unset
	// fields take the built-in defaults.
	Config map[string]any `json:"config,omitempty"`
	// ScaleToZero holds scale-to-zero settings in the ConfigMap entry format
	// (enable_scale_to_zero, retention_period).
	ScaleToZero map[string]any `json:"scaleToZero,omitempty"`
	// Metrics is available (default), absent or unreachable.
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
	Replicas        []Replica  `json:"replicas"`
}

// Replica is one pod reporting metrics.
type Replica struct {
	Pod          string  `json:"pod"`
	KvCacheUsage float64 `json:"kvCacheUsage"`
	QueueLength  float64 `json:"queueLength"`
}

// Defaults shared with the VariantAutoscaling CRD.
const (
	defaultMinReplicas = 1
	defaultMaxReplicas = 2
	defaultCost        = 10.0
)

// Parse reads and validates a snapshot. Unknown fields are errors, so a typo
// never silently falls back to a default.
func Parse(data []byte) (*Snapshot, error) {
	var s Snapshot
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
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if s.ModelID == "" {
		bad("modelID", "required")
	}
	switch s.Metrics {
	case "", string(enforcer.MetricsAvailable), string(enforcer.MetricsAbsent), string(enforcer.MetricsUnreachable):
	default:
		bad("metrics", "%q is not one of available, absent, unreachable", s.Metrics)
	}
	if s.RequestsInRetention != nil && !(finite(*s.RequestsInRetention) && *s.RequestsInRetention >= 0) {
		bad("requestsInRetention", "%v must be a finite number >= 0", *s.RequestsInRetention)
	}
	if len(s.Variants) == 0 {
		bad("variants", "at least one variant is required")
	}
	seen := map[string]int{}
	pods := map[string]string{}
	for i, v := range s.Variants {
		at := fmt.Sprintf("variants[%d]", i)
		if v.Name == "" {
			bad(at+".name", "required")
		} else if j, dup := seen[v.Name]; dup {
			bad(at+".name", "duplicate variant %q (also variants[%d])", v.Name, j)
		} else {
			seen[v.Name] = i
		}
		if v.Cost != nil && !(finite(*v.Cost) && *v.Cost >= 0) {
			bad(at+".cost", "%v must be a finite number >= 0", *v.Cost)
		}
		lo, hi := v.bounds()
		if lo < 0 {
			bad(at+".minReplicas", "%d must be >= 0", lo)
		}
		if hi < 1 {
			bad(at+".maxReplicas", "%d must be >= 1", hi)
		}
		if lo > hi {
			bad(at+".minReplicas", "%d is greater than maxReplicas %d", lo, hi)
		}
		if v.CurrentReplicas < 0 {
			bad(at+".currentReplicas", "%d must be >= 0", v.CurrentReplicas)
		}
		if v.DesiredReplicas < 0 {
			bad(at+".desiredReplicas", "%d must be >= 0", v.DesiredReplicas)
		}
		if v.PendingReplicas != nil && *v.PendingReplicas < 0 {
			bad(at+".pendingReplicas", "%d must be >= 0", *v.PendingReplicas)
		}
		for k, r := range v.Replicas {
			rat := fmt.Sprintf("%s.replicas[%d]", at, k)
			if r.Pod == "" {
				bad(rat+".pod", "required")
			} else if other, dup := pods[r.Pod]; dup {
				bad(rat+".pod", "duplicate pod %q (also in %s)", r.Pod, other)
			} else {
				pods[r.Pod] = rat
			}
			if !finite(r.KvCacheUsage) || r.KvCacheUsage < 0 || r.KvCacheUsage > 1 {
				bad(rat+".kvCacheUsage", "%v is outside [0, 1]", r.KvCacheUsage)
			}
			if !finite(r.QueueLength) || r.QueueLength < 0 {
				bad(rat+".queueLength", "%v must be a finite number >= 0", r.QueueLength)
			}
		}
	}
	if _, err := s.resolveConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
func (s *Snapshot) resolveConfig() (config.Resolved, error) {
	store := config.NewStore()
	sat := map[string]any{}
	for k, v := range s.Config {
		sat[k] = v
	}
	if s.Analyzer != "" {
		if prev, ok := sat["analyzerName"]; ok && prev != s.Analyzer {
			return config.Resolved{}, fmt.Errorf("analyzer: %q conflicts with config.analyzerName %q", s.Analyzer, prev)
		}
		sat["analyzerName"] = s.Analyzer
	}
	var errs []error
	for name, entry := range map[string]map[string]any{config.SaturationConfigMapName: sat, config.ScaleToZeroConfigMapName: s.ScaleToZero} {
		if len(entry) == 0 {
			continue
		}
		text, err := yaml.Marshal(entry)
		if err != nil {
			return config.Resolved{}, err
		}
		if err := store.Apply(name, map[string]string{config.DefaultKey: string(text)}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return config.Resolved{}, errors.Join(errs...)
	}
	return store.Resolve(s.ModelID, s.Namespace), nil
}

// Input converts a validated snapshot into the pipeline's input and the
// decision time.
func (s *Snapshot) Input() (pipeline.GroupInput, time.Time, error) {
	cfg, err := s.resolveConfig()
	if err != nil {
		return pipeline.GroupInput{}, time.Time{}, err
	}
	in := pipeline.GroupInput{
		Config:              cfg,
		Metrics:             enforcer.MetricsAvailable,
		RequestsInRetention: s.RequestsInRetention,
		Group:               decision.Group{ModelID: s.ModelID, Namespace: s.Namespace},
	}
	if s.Metrics != "" {
		in.Metrics = enforcer.MetricsState(s.Metrics)
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
			PendingReplicas: max(0, v.CurrentReplicas-int32(len(v.Replicas))),
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
		in.Group.Variants = append(in.Group.Variants, dv)
		for _, r := range v.Replicas {
			in.Group.Replicas = append(in.Group.Replicas, decision.ReplicaMetrics{
				Pod: r.Pod, Variant: v.Name, KvCacheUsage: r.KvCacheUsage, QueueLength: r.QueueLength,
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

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
