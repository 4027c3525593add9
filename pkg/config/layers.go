package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Settings come in layers, highest first: command-line flags, environment
// variables (WVA_*), the --config-file document, the ConfigMaps, built-in
// defaults. Load is the one place that stacks the first three; the Store
// puts the result (Pinned) above every ConfigMap entry.

// ConfigFileFlag names the flag of the config file (env WVA_CONFIG_FILE).
const ConfigFileFlag = "config-file"

// EnvPrefix prefixes every environment variable wva reads for settings.
const EnvPrefix = "WVA_"

// LookupEnv reads one environment variable (os.LookupEnv in programs).
type LookupEnv func(string) (string, bool)

// EnvName is the variable that sets a flag: WVA_ + the name in upper
// snake case (--engine-interval: WVA_ENGINE_INTERVAL).
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// File is the --config-file document. Saturation and ScaleToZero take the
// keys of the ConfigMaps' default entries and are pinned over every entry;
// each program section takes that program's flags by name, so one file can
// be mounted into every program.
type File struct {
	Saturation    map[string]json.RawMessage `json:"saturation,omitempty"`
	ScaleToZero   map[string]json.RawMessage `json:"scaleToZero,omitempty"`
	Adapter       map[string]json.RawMessage `json:"adapter,omitempty"`
	Controller    map[string]json.RawMessage `json:"controller,omitempty"`
	ScaleFromZero map[string]json.RawMessage `json:"scaleFromZero,omitempty"`
}

// Program section names of File, as the commands pass them to Load.
const (
	ProgramAdapter       = "adapter"
	ProgramController    = "controller"
	ProgramScaleFromZero = "scaleFromZero"
)

func (f *File) program(name string) map[string]json.RawMessage {
	switch name {
	case ProgramAdapter:
		return f.Adapter
	case ProgramController:
		return f.Controller
	case ProgramScaleFromZero:
		return f.ScaleFromZero
	}
	return nil
}

// ParseFile reads a config file strictly: unknown sections or keys are
// errors, not silently ignored settings.
func ParseFile(text []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(text, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// envKey maps an environment variable onto a ConfigMap key it pins.
type envKey struct {
	env, section, key string
	kind              byte // 'b' bool, 'n' number, 'd' duration, 's' string
}

const (
	sectionSaturation  = "saturation"
	sectionScaleToZero = "scaleToZero"
)

// envKeys are the environment variables that pin ConfigMap keys, with the
// key each sets (upstream names the first one).
var envKeys = []envKey{
	{"WVA_SCALE_TO_ZERO", sectionScaleToZero, "enable_scale_to_zero", 'b'},
	{"WVA_SCALE_TO_ZERO_RETENTION_PERIOD", sectionScaleToZero, "retention_period", 'd'},
	{"WVA_ANALYZER_NAME", sectionSaturation, "analyzerName", 's'},
	{"WVA_SLO_TARGET_TTFT", sectionSaturation, "targetTTFT", 'n'},
	{"WVA_SLO_TARGET_ITL", sectionSaturation, "targetITL", 'n'},
	{"WVA_SLO_ATTAINMENT", sectionSaturation, "sloAttainment", 'n'},
	{"WVA_SLO_STARTUP_DELAY", sectionSaturation, "startupDelay", 'd'},
}

// EnvKeyNames lists the variables that pin ConfigMap keys.
func EnvKeyNames() []string {
	out := make([]string, len(envKeys))
	for i, k := range envKeys {
		out[i] = k.env
	}
	return out
}

// envJSON turns one variable's text into the JSON value of its key.
func (k envKey) envJSON(v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	switch k.kind {
	case 'b':
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errors.New("want true or false")
		}
		return json.RawMessage(strconv.FormatBool(b)), nil
	case 'n':
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("want a finite number")
		}
		return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case 'd':
		if _, err := time.ParseDuration(v); err != nil {
			return nil, errors.New("want a duration such as \"10m\"")
		}
	}
	return json.Marshal(v)
}

// Pinned are the ConfigMap keys set by --config-file or WVA_* variables.
// They hold for every model, over every ConfigMap entry (see Store.Pin).
type Pinned struct {
	saturation  *saturationEntry
	scaleToZero *scaleToZeroEntry
	// Keys lists what is pinned, "section.key=value (origin)", for logs.
	Keys []string
}

// pins stacks the environment over the file's ConfigMap sections and
// validates the result over the built-in defaults.
func pins(f *File, fileName string, env LookupEnv) (Pinned, error) {
	var p Pinned
	origin := map[string]string{} // section.key -> where it was set
	sections := map[string]map[string]json.RawMessage{sectionSaturation: {}, sectionScaleToZero: {}}
	for name, src := range map[string]map[string]json.RawMessage{sectionSaturation: f.Saturation, sectionScaleToZero: f.ScaleToZero} {
		for k, v := range src {
			if k == "model_id" || k == "namespace" {
				return p, fmt.Errorf("--%s %s: %s.%s: the file pins keys for every model; per-model entries belong in the ConfigMaps",
					ConfigFileFlag, fileName, name, k)
			}
			sections[name][k] = v
			origin[name+"."+k] = "--" + ConfigFileFlag + " " + fileName
		}
	}
	for _, k := range envKeys {
		v, ok := env(k.env)
		if !ok {
			continue
		}
		raw, err := k.envJSON(v)
		if err != nil {
			return p, fmt.Errorf("%s=%q: %v", k.env, v, err)
		}
		sections[k.section][k.key] = raw
		origin[k.section+"."+k.key] = k.env
	}
	decode := func(section string, into any) error {
		b, _ := json.Marshal(sections[section])
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("--%s %s: %s: %w", ConfigFileFlag, fileName, section, err)
		}
		return nil
	}
	if len(sections[sectionSaturation]) > 0 {
		p.saturation = &saturationEntry{}
		if err := decode(sectionSaturation, p.saturation); err != nil {
			return p, err
		}
		if err := p.saturation.over(defaultSaturation()).Validate(); err != nil {
			return p, pinError(err, sectionSaturation, origin)
		}
	}
	if len(sections[sectionScaleToZero]) > 0 {
		p.scaleToZero = &scaleToZeroEntry{}
		if err := decode(sectionScaleToZero, p.scaleToZero); err != nil {
			return p, err
		}
		if err := p.scaleToZero.over(defaultScaleToZero()).Validate(); err != nil {
			return p, pinError(err, sectionScaleToZero, origin)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(origin)) {
		section, k, _ := strings.Cut(key, ".")
		p.Keys = append(p.Keys, fmt.Sprintf("%s=%s (%s)", key, sections[section][k], origin[key]))
	}
	return p, nil
}

// pinError names where the offending key was set.
func pinError(err error, section string, origin map[string]string) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		if o, ok := origin[section+"."+fe.Field]; ok {
			return fmt.Errorf("%s: %s.%w", o, section, err)
		}
	}
	return fmt.Errorf("pinned settings (--%s, WVA_*): %s: %w", ConfigFileFlag, section, err)
}

// Load stacks flags, environment and config file for one program (a File
// section name): every flag of fs not given on the command line takes
// WVA_<FLAG>, else the file's program section; the returned Pinned holds
// the ConfigMap keys the file and the WVA_* key variables set. readFile
// reads the --config-file (os.ReadFile in programs).
func Load(program string, fs *pflag.FlagSet, env LookupEnv, readFile func(string) ([]byte, error)) (Pinned, error) {
	path := ""
	if f := fs.Lookup(ConfigFileFlag); f != nil {
		path = f.Value.String()
		if v, ok := env(EnvName(ConfigFileFlag)); ok && !f.Changed {
			path = v
		}
	}
	file := &File{}
	if path != "" {
		text, err := readFile(path)
		if err != nil {
			return Pinned{}, fmt.Errorf("--%s: %w", ConfigFileFlag, err)
		}
		if file, err = ParseFile(text); err != nil {
			return Pinned{}, fmt.Errorf("--%s %s: %w", ConfigFileFlag, path, err)
		}
	}
	if err := applyFlags(fs, file.program(program), program, path, env); err != nil {
		return Pinned{}, err
	}
	return pins(file, path, env)
}

// applyFlags sets each flag not given on the command line from its
// variable, else from the file section.
func applyFlags(fs *pflag.FlagSet, section map[string]json.RawMessage, program, path string, env LookupEnv) error {
	for _, name := range slices.Sorted(maps.Keys(section)) {
		if fs.Lookup(name) == nil || name == ConfigFileFlag {
			return fmt.Errorf("--%s %s: %s.%s: no such flag (the section takes the program's flags by name, without dashes)",
				ConfigFileFlag, path, program, name)
		}
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == ConfigFileFlag {
			return
		}
		if v, ok := env(EnvName(f.Name)); ok {
			if err := setFlag(fs, f, splitList(f, v), v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q (--%s): %v", EnvName(f.Name), v, f.Name, err))
			}
			return
		}
		raw, ok := section[f.Name]
		if !ok {
			return
		}
		values, text, err := rawFlagValue(raw)
		if err == nil {
			err = setFlag(fs, f, values, text)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %s: %s.%s: %s: %v", ConfigFileFlag, path, program, f.Name, raw, err))
		}
	})
	return errors.Join(errs...)
}

// splitList reads a list flag's variable as comma-separated values.
func splitList(f *pflag.Flag, v string) []string {
	if _, ok := f.Value.(pflag.SliceValue); ok {
		return strings.Split(v, ",")
	}
	return []string{v}
}

// rawFlagValue turns a YAML value into flag text: strings as written,
// numbers and booleans as written, lists element by element.
func rawFlagValue(raw json.RawMessage) ([]string, string, error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		var out []string
		for _, e := range list {
			s, err := scalarText(e)
			if err != nil {
				return nil, "", err
			}
			out = append(out, s)
		}
		return out, strings.Join(out, ","), nil
	}
	s, err := scalarText(raw)
	return []string{s}, s, err
}

func scalarText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v.(type) {
	case bool, float64:
		return string(raw), nil
	}
	return "", errors.New("want a string, number, boolean or list of them")
}

func setFlag(fs *pflag.FlagSet, f *pflag.Flag, values []string, text string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(values); err != nil {
			return err
		}
		f.Changed = true
		return nil
	}
	if len(values) != 1 {
		return errors.New("not a list flag: want one value")
	}
	return fs.Set(f.Name, text)
}
