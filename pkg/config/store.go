package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// EntryError is a rejected ConfigMap entry. Kept says whether an earlier
// valid version of the entry stays in force.
type EntryError struct {
	ConfigMap string
	Key       string
	Kept      bool
	Err       error
}

func (e *EntryError) Error() string {
	outcome := "entry ignored"
	if e.Kept {
		outcome = "previous valid entry kept"
	}
	return fmt.Sprintf("%s: entry %q: %v (%s)", e.ConfigMap, e.Key, e.Err, outcome)
}

func (e *EntryError) Unwrap() error { return e.Err }

// OverrideKey is the upstream data key of a per-model override. Kubernetes
// rejects '#' and '/' in ConfigMap data keys, so in a real ConfigMap use the
// model_id/namespace fields instead; the key form works in files and snapshots.
func OverrideKey(modelID, namespace string) string { return modelID + "#" + namespace }

type validator interface{ Validate() error }

type entryOf[V any] interface {
	scope() scope
	over(V) V
}

// section is one ConfigMap's entries, last valid version of each key.
type section[E entryOf[V], V validator] struct {
	configMap string
	builtin   func() V
	entries   map[string]E
}

func (s *section[E, V]) defaultValue() (V, bool) {
	base := s.builtin()
	if e, ok := s.entries[DefaultKey]; ok {
		return e.over(base), true
	}
	return base, false
}

// apply replaces the section's entries with data. A key that fails to parse
// or validate keeps its previous valid version, if it had one.
func (s *section[E, V]) apply(data map[string]string) error {
	next := make(map[string]E, len(data))
	var errs []error
	reject := func(key string, err error) {
		prev, had := s.entries[key]
		if had {
			next[key] = prev
		}
		errs = append(errs, &EntryError{ConfigMap: s.configMap, Key: key, Kept: had, Err: err})
	}
	// The default entry first: overrides are validated on top of it.
	keys := sortedKeys(data)
	sort.SliceStable(keys, func(i, j int) bool { return keys[i] == DefaultKey && keys[j] != DefaultKey })
	base := s.builtin()
	for _, key := range keys {
		var entry E
		if err := yaml.UnmarshalStrict([]byte(data[key]), &entry); err != nil {
			reject(key, fmt.Errorf("cannot parse: %w", err))
			continue
		}
		merged := entry.over(base)
		if err := merged.Validate(); err != nil {
			reject(key, err)
			continue
		}
		next[key] = entry
		if key == DefaultKey {
			base = merged
		}
	}
	s.entries = next
	return errors.Join(errs...)
}

// resolve layers built-in defaults, the default entry and the most specific
// override. It returns the value and the key of the entry that decided it.
func (s *section[E, V]) resolve(modelID, namespace string) (V, string) {
	base, hasDefault := s.defaultValue()
	source := "built-in defaults"
	if hasDefault {
		source = DefaultKey
	}
	key, ok := s.overrideFor(modelID, namespace)
	if !ok {
		return base, source
	}
	merged := s.entries[key].over(base)
	if merged.Validate() != nil {
		// The override was valid against an older default; the current
		// default makes it inconsistent, so the default alone applies.
		return base, source + fmt.Sprintf(" (override %q inconsistent with default, ignored)", key)
	}
	return merged, key
}

// overrideFor finds the most specific override: the "modelID#namespace" key,
// then model_id+namespace fields, then model_id alone. Ties go to the
// alphabetically first key so resolution is deterministic.
func (s *section[E, V]) overrideFor(modelID, namespace string) (string, bool) {
	if _, ok := s.entries[OverrideKey(modelID, namespace)]; ok {
		return OverrideKey(modelID, namespace), true
	}
	var modelOnly string
	for _, key := range sortedKeys(s.entries) {
		if key == DefaultKey {
			continue
		}
		sc := s.entries[key].scope()
		if sc.ModelID != modelID {
			continue
		}
		if sc.Namespace == namespace {
			return key, true
		}
		if sc.Namespace == "" && modelOnly == "" {
			modelOnly = key
		}
	}
	return modelOnly, modelOnly != ""
}

func (s *section[E, V]) hasEntryFor(modelID, namespace string) bool {
	if _, ok := s.entries[DefaultKey]; ok {
		return true
	}
	_, ok := s.overrideFor(modelID, namespace)
	return ok
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Resolved is the configuration in force for one variant group, with the
// entry each part came from (for logs and decision reasons).
type Resolved struct {
	Saturation        Saturation
	SaturationSource  string
	ScaleToZero       ScaleToZero
	ScaleToZeroSource string
	// QueueingModel is nil unless wva-queueing-model-config has an entry
	// that applies to the group; its presence selects the SLO analyzer.
	QueueingModel       *QueueingModel
	QueueingModelSource string
}

// Analyzer is the analyzer the group runs: the SLO analyzer when the
// queueing-model ConfigMap applies, else analyzerName.
func (r Resolved) Analyzer() string {
	if r.QueueingModel != nil {
		return AnalyzerQueueingModel
	}
	return r.Saturation.AnalyzerName
}

// Store holds the last valid version of every entry of wva's ConfigMaps. It
// is safe for concurrent use: the engine resolves while informers apply.
type Store struct {
	mu          sync.RWMutex
	saturation  section[saturationEntry, Saturation]
	scaleToZero section[scaleToZeroEntry, ScaleToZero]
	queueing    section[queueingModelEntry, QueueingModel]
}

// NewStore returns a store with no ConfigMaps: built-in defaults apply.
func NewStore() *Store {
	return &Store{
		saturation:  section[saturationEntry, Saturation]{configMap: SaturationConfigMapName, builtin: DefaultSaturation},
		scaleToZero: section[scaleToZeroEntry, ScaleToZero]{configMap: ScaleToZeroConfigMapName, builtin: DefaultScaleToZero},
		queueing:    section[queueingModelEntry, QueueingModel]{configMap: QueueingModelConfigMapName, builtin: DefaultQueueingModel},
	}
}

// IsConfigMapName reports whether name is one of the ConfigMaps wva reads.
func IsConfigMapName(name string) bool {
	switch name {
	case SaturationConfigMapName, ScaleToZeroConfigMapName, QueueingModelConfigMapName:
		return true
	}
	return false
}

// Apply replaces the entries of the named ConfigMap with data. Every invalid
// entry is reported (each an *EntryError); valid ones take effect, invalid
// ones keep their last valid version.
func (s *Store) Apply(configMapName string, data map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch configMapName {
	case SaturationConfigMapName:
		return s.saturation.apply(data)
	case ScaleToZeroConfigMapName:
		return s.scaleToZero.apply(data)
	case QueueingModelConfigMapName:
		return s.queueing.apply(data)
	}
	return fmt.Errorf("unknown ConfigMap %q: want one of %s", configMapName,
		strings.Join([]string{SaturationConfigMapName, ScaleToZeroConfigMapName, QueueingModelConfigMapName}, ", "))
}

// Remove forgets a deleted ConfigMap; built-in defaults apply again.
func (s *Store) Remove(configMapName string) {
	_ = s.Apply(configMapName, nil)
}

// Resolve returns the configuration in force for modelID in namespace.
func (s *Store) Resolve(modelID, namespace string) Resolved {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var r Resolved
	r.Saturation, r.SaturationSource = s.saturation.resolve(modelID, namespace)
	r.ScaleToZero, r.ScaleToZeroSource = s.scaleToZero.resolve(modelID, namespace)
	if s.queueing.hasEntryFor(modelID, namespace) {
		qm, src := s.queueing.resolve(modelID, namespace)
		r.QueueingModel, r.QueueingModelSource = &qm, src
	}
	return r
}
