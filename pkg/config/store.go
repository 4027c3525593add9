package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/decision/params"
)

// EntryError is a rejected ConfigMap entry. Kept says whether an earlier
// valid version of the entry stays in force; Restored, that this version
// came from LastGoodConfigMapName (this process had seen no valid one).
type EntryError struct {
	ConfigMap string
	Key       string
	Kept      bool
	Restored  bool
	Err       error
}

func (e *EntryError) Error() string {
	outcome := "entry ignored"
	switch {
	case e.Restored:
		outcome = "last valid entry from ConfigMap " + LastGoodConfigMapName + " kept"
	case e.Kept:
		outcome = "previous valid entry kept"
	}
	return fmt.Sprintf("%s: entry %q: %v (%s)", e.ConfigMap, e.Key, e.Err, outcome)
}

func (e *EntryError) Unwrap() error { return e.Err }

// LastGoodConfigMapName is the wva-owned ConfigMap (in the config namespace)
// where the leader keeps the valid version of every entry in force, so a
// restarted or newly elected replica keeps the same configuration when a
// user entry is broken. Its data keys are LastGoodKey(configMap, key).
const LastGoodConfigMapName = "wva-last-good-config"

// LastGoodKey is the data key of one entry in LastGoodConfigMapName:
// "<configmap-name>.<entry-key>" (both are valid ConfigMap key characters).
func LastGoodKey(configMap, key string) string { return configMap + "." + key }

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
	// raw is the text of each entry in entries, as persisted.
	raw map[string]string
	// restored marks entries whose text came from lastGood.
	restored map[string]bool
	// data is the ConfigMap's data as last applied, re-applied when
	// lastGood changes.
	data map[string]string
	// lastGood is this ConfigMap's part of LastGoodConfigMapName.
	lastGood map[string]string
	// invalid is every rejected entry of the last apply.
	invalid []invalidEntry
}

// invalidEntry is a rejected entry with the models it was meant for.
type invalidEntry struct {
	err *EntryError
	// sc is the entry's scope; known is false when it could not be read,
	// and the entry then counts as applying to every model.
	sc    scope
	known bool
}

func (s *section[E, V]) defaultValue() (V, bool) {
	base := s.builtin()
	if e, ok := s.entries[DefaultKey]; ok {
		return e.over(base), true
	}
	return base, false
}

// parse reads and validates one entry on top of base.
func (s *section[E, V]) parse(text string, base V) (E, V, error) {
	var entry E
	if err := yaml.UnmarshalStrict([]byte(text), &entry); err != nil {
		var merged V
		return entry, merged, fmt.Errorf("cannot parse: %w", err)
	}
	merged := entry.over(base)
	return entry, merged, merged.Validate()
}

// apply replaces the section's entries with data. A key that fails to parse
// or validate keeps its previous valid version, if it had one, else the
// version in lastGood, if that one is valid.
func (s *section[E, V]) apply(data map[string]string) error {
	s.data = data
	next := make(map[string]E, len(data))
	raw := make(map[string]string, len(data))
	restored := map[string]bool{}
	s.invalid = nil
	var errs []error
	// The default entry first: overrides are validated on top of it.
	keys := slices.Sorted(maps.Keys(data))
	sort.SliceStable(keys, func(i, j int) bool { return keys[i] == DefaultKey && keys[j] != DefaultKey })
	base := s.builtin()
	keep := func(key string, entry E, text string, merged V) {
		next[key], raw[key] = entry, text
		if key == DefaultKey {
			base = merged
		}
	}
	for _, key := range keys {
		entry, merged, err := s.parse(data[key], base)
		if err == nil {
			keep(key, entry, data[key], merged)
			continue
		}
		ee := &EntryError{ConfigMap: s.configMap, Key: key, Err: err}
		if prev, had := s.entries[key]; had {
			ee.Kept, ee.Restored = true, s.restored[key]
			restored[key] = s.restored[key]
			keep(key, prev, s.raw[key], prev.over(base))
		} else if text, ok := s.lastGood[key]; ok {
			// A fresh process: the leader's persisted version, if it is
			// still valid on top of the current default.
			if prev, m, perr := s.parse(text, base); perr == nil {
				ee.Kept, ee.Restored = true, true
				restored[key] = true
				keep(key, prev, text, m)
			}
		}
		inv := invalidEntry{err: ee}
		inv.sc, inv.known = scopeOfText(data[key])
		if prev, ok := next[key]; ok && !inv.known {
			inv.sc = prev.scope()
			inv.known = inv.sc.ModelID != ""
		}
		s.invalid = append(s.invalid, inv)
		errs = append(errs, ee)
	}
	s.entries, s.raw, s.restored = next, raw, restored
	return errors.Join(errs...)
}

// scopeOfText reads just model_id/namespace of an entry that may be
// invalid otherwise.
func scopeOfText(text string) (scope, bool) {
	var sc struct {
		ModelID   string `json:"model_id"`
		Namespace string `json:"namespace"`
	}
	if yaml.Unmarshal([]byte(text), &sc) != nil || sc.ModelID == "" {
		return scope{}, false
	}
	return scope{ModelID: sc.ModelID, Namespace: sc.Namespace}, true
}

// appliesTo reports whether an invalid entry was meant for the model in
// namespace: the default entry and entries whose scope cannot be read
// concern every model.
func (e invalidEntry) appliesTo(modelID, namespace string) bool {
	key := e.err.Key
	switch {
	case key == DefaultKey:
		return true
	case key == OverrideKey(modelID, namespace):
		return true
	case strings.Contains(key, "#"):
		return false
	case !e.known:
		return true
	}
	return e.sc.ModelID == modelID && (e.sc.Namespace == "" || e.sc.Namespace == namespace)
}

// pinnedSource marks a source when pinned settings (--config-file, WVA_*)
// were applied over it.
func pinnedSource[E any](source string, pin *E) string {
	if pin == nil {
		return source
	}
	return source + " + pinned settings"
}

// overrideFor finds the most specific override: the "modelID#namespace" key,
// then model_id+namespace fields, then model_id alone. Ties go to the
// alphabetically first key so resolution is deterministic.
func (s *section[E, V]) overrideFor(modelID, namespace string) (string, bool) {
	if _, ok := s.entries[OverrideKey(modelID, namespace)]; ok {
		return OverrideKey(modelID, namespace), true
	}
	var modelOnly string
	for _, key := range slices.Sorted(maps.Keys(s.entries)) {
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

// Store holds the last valid version of every entry of wva's ConfigMaps:
// the global ones (in the config namespace) and the namespace-local ones,
// which override them for the VAs of their namespace. It is safe for
// concurrent use: the engine resolves while informers apply.
type Store struct {
	mu sync.RWMutex
	sections
	// local is the namespace-local ConfigMaps, by namespace.
	local map[string]*sections
	// pinned holds over every entry (--config-file, WVA_* variables).
	pinned Pinned
}

// Pin sets the keys pinned by --config-file and WVA_* variables: they hold
// for every model, over the global and namespace-local ConfigMaps' default
// and override entries; an entry inconsistent with them is skipped.
func (s *Store) Pin(p Pinned) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pinned = p
}

// sections is one namespace's three ConfigMaps.
type sections struct {
	saturation  section[saturationEntry, saturation]
	scaleToZero section[scaleToZeroEntry, scaleToZero]
	queueing    section[queueingModelEntry, queueingModel]
}

// newSections names the ConfigMaps prefix+name in errors (prefix "ns/" for
// namespace-local ones, so their errors and gauges stay apart).
func newSections(prefix string) sections {
	return sections{
		saturation:  section[saturationEntry, saturation]{configMap: prefix + SaturationConfigMapName, builtin: defaultSaturation},
		scaleToZero: section[scaleToZeroEntry, scaleToZero]{configMap: prefix + ScaleToZeroConfigMapName, builtin: defaultScaleToZero},
		queueing:    section[queueingModelEntry, queueingModel]{configMap: prefix + QueueingModelConfigMapName, builtin: defaultQueueingModel},
	}
}

// NewStore returns a store with no ConfigMaps: built-in defaults apply.
func NewStore() *Store {
	return &Store{sections: newSections(""), local: map[string]*sections{}}
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
	return s.sections.apply(configMapName, data)
}

// ApplyNamespace replaces the entries of the named ConfigMap of namespace
// (a namespace-local ConfigMap), as Apply does for the global one.
// Namespace-local entries are not persisted in LastGoodConfigMapName.
func (s *Store) ApplyNamespace(namespace, configMapName string, data map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.local[namespace]
	if !ok {
		n := newSections(namespace + "/")
		l = &n
	}
	err := l.apply(configMapName, data)
	if l.empty() {
		delete(s.local, namespace)
	} else {
		s.local[namespace] = l
	}
	return err
}

// RemoveNamespace forgets a deleted namespace-local ConfigMap; the global
// one applies again in that namespace.
func (s *Store) RemoveNamespace(namespace, configMapName string) {
	_ = s.ApplyNamespace(namespace, configMapName, nil)
}

func (l *sections) empty() bool {
	return len(l.saturation.data)+len(l.scaleToZero.data)+len(l.queueing.data) == 0
}

func (s *sections) apply(configMapName string, data map[string]string) error {
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

// SetLastGood replaces the persisted last valid entries (the data of
// LastGoodConfigMapName) and re-applies every ConfigMap, so a broken entry
// seen before them falls back to them.
func (s *Store) SetLastGood(data map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	split := func(configMap string) map[string]string {
		out := map[string]string{}
		for k, v := range data {
			if key, ok := strings.CutPrefix(k, configMap+"."); ok && key != "" {
				out[key] = v
			}
		}
		return out
	}
	s.saturation.lastGood = split(SaturationConfigMapName)
	s.scaleToZero.lastGood = split(ScaleToZeroConfigMapName)
	s.queueing.lastGood = split(QueueingModelConfigMapName)
	// Errors were reported when each ConfigMap was applied.
	_ = s.saturation.apply(s.saturation.data)
	_ = s.scaleToZero.apply(s.scaleToZero.data)
	_ = s.queueing.apply(s.queueing.data)
}

// LastGood is the text of every entry in force, keyed LastGoodKey: what
// the leader persists in LastGoodConfigMapName.
func (s *Store) LastGood() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]string{}
	for cm, raw := range map[string]map[string]string{SaturationConfigMapName: s.saturation.raw,
		ScaleToZeroConfigMapName: s.scaleToZero.raw, QueueingModelConfigMapName: s.queueing.raw} {
		for k, v := range raw {
			out[LastGoodKey(cm, k)] = v
		}
	}
	return out
}

// Invalid lists the entries rejected by the last apply of each ConfigMap,
// global and namespace-local.
func (s *Store) Invalid() []*EntryError {
	return s.invalidFor(nil, func(invalidEntry) bool { return true })
}

// InvalidFor lists the rejected entries meant for modelID in namespace (a
// default entry concerns every model), in the global ConfigMaps and in
// namespace's own.
func (s *Store) InvalidFor(modelID, namespace string) []*EntryError {
	return s.invalidFor(&namespace, func(e invalidEntry) bool { return e.appliesTo(modelID, namespace) })
}

func (s *Store) invalidFor(namespace *string, match func(invalidEntry) bool) []*EntryError {
	s.mu.RLock()
	defer s.mu.RUnlock()
	all := []*sections{&s.sections}
	if namespace != nil {
		if l, ok := s.local[*namespace]; ok {
			all = append(all, l)
		}
	} else {
		for _, ns := range slices.Sorted(maps.Keys(s.local)) {
			all = append(all, s.local[ns])
		}
	}
	var out []*EntryError
	for _, sec := range all {
		for _, list := range [][]invalidEntry{sec.saturation.invalid, sec.scaleToZero.invalid, sec.queueing.invalid} {
			for _, e := range list {
				if match(e) {
					out = append(out, e.err)
				}
			}
		}
	}
	return out
}

// Entries lists every entry of the ConfigMaps as last applied, valid or
// not, global and namespace-local: [ConfigMap, key], the ConfigMap named as
// in EntryError ("<namespace>/<name>" for a namespace-local one).
func (s *Store) Entries() [][2]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	all := []*sections{&s.sections}
	for _, ns := range slices.Sorted(maps.Keys(s.local)) {
		all = append(all, s.local[ns])
	}
	var out [][2]string
	for _, sec := range all {
		for _, e := range []struct {
			configMap string
			data      map[string]string
		}{{sec.saturation.configMap, sec.saturation.data}, {sec.scaleToZero.configMap, sec.scaleToZero.data}, {sec.queueing.configMap, sec.queueing.data}} {
			for _, k := range slices.Sorted(maps.Keys(e.data)) {
				out = append(out, [2]string{e.configMap, k})
			}
		}
	}
	return out
}

// Remove forgets a deleted ConfigMap; built-in defaults apply again.
func (s *Store) Remove(configMapName string) {
	_ = s.Apply(configMapName, nil)
}

// Resolve returns the configuration in force for modelID in namespace.
func (s *Store) Resolve(modelID, namespace string) params.Resolved {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var (
		r        params.Resolved
		localSat *section[saturationEntry, saturation]
		localStz *section[scaleToZeroEntry, scaleToZero]
		localQM  *section[queueingModelEntry, queueingModel]
	)
	if l := s.local[namespace]; l != nil {
		localSat, localStz, localQM = &l.saturation, &l.scaleToZero, &l.queueing
	}
	sat, src := resolve(&s.saturation, localSat, modelID, namespace, s.pinned.saturation)
	r.Scaling, r.SLO, r.SaturationSource = sat.Scaling, sat.SLO, src
	stz, src := resolve(&s.scaleToZero, localStz, modelID, namespace, s.pinned.scaleToZero)
	r.ScaleToZero, r.ScaleToZeroSource = params.ScaleToZero(stz), src
	if s.queueing.hasEntryFor(modelID, namespace) || (localQM != nil && localQM.hasEntryFor(modelID, namespace)) {
		qm, src := resolve(&s.queueing, localQM, modelID, namespace, nil)
		r.QueueingModel, r.QueueingModelSource = (*params.QueueingModel)(&qm), src
	}
	return r
}

// resolve layers, field by field: built-in defaults, the global default
// entry, local's default entry, the global override and local's override
// (each the most specific for the model; local nil: the namespace has no
// ConfigMap of its own), with pin (nil: none) applied over every layer. A
// layer that would make the value invalid (it was validated against
// another base, or the pins contradict it) is skipped and named in the
// source. The source is the last layer applied; local keys read
// "<namespace>/<configmap>: <key>".
func resolve[E entryOf[V], V validator](global, local *section[E, V], modelID, namespace string, pin *E) (V, string) {
	v, source := global.builtin(), "built-in defaults"
	if pin != nil {
		v = (*pin).over(v)
	}
	// Without a local ConfigMap, a skipped layer is explained where it is
	// skipped (note, dropped when a layer above applies); with one, the
	// skipped layers are listed together.
	var note string
	var skipped []string
	layer := func(s *section[E, V], key string, ok, override bool) {
		if !ok {
			return
		}
		name := key
		if s == local {
			name = s.configMap + ": " + key
		}
		next := s.entries[key].over(v)
		if pin != nil {
			next = (*pin).over(next)
		}
		if next.Validate() == nil {
			v, source, note = next, name, ""
			return
		}
		switch {
		case local != nil:
			skipped = append(skipped, name)
		case !override:
			// The default entry fits the built-in defaults it was
			// validated on: only the pins can contradict it.
			note = fmt.Sprintf(" (%q inconsistent with pinned settings, ignored)", DefaultKey)
		default:
			with := "default"
			if pin != nil {
				with = "default or pinned settings"
			}
			note += fmt.Sprintf(" (override %q inconsistent with %s, ignored)", key, with)
		}
	}
	_, ok := global.entries[DefaultKey]
	layer(global, DefaultKey, ok, false)
	if local != nil {
		_, ok = local.entries[DefaultKey]
		layer(local, DefaultKey, ok, false)
	}
	key, ok := global.overrideFor(modelID, namespace)
	layer(global, key, ok, true)
	if local != nil {
		key, ok = local.overrideFor(modelID, namespace)
		layer(local, key, ok, true)
	}
	source += note
	if len(skipped) > 0 {
		source += fmt.Sprintf(" (%s inconsistent with the layers below, ignored)", strings.Join(quoteAll(skipped), ", "))
	}
	return v, pinnedSource(source, pin)
}

func quoteAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
