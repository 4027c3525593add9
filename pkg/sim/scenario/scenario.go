package scenario

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// DefaultScenarioYAML is the embedded scenario `wva simulate` runs without
// arguments.
//
//go:embed scenarios/default.yaml
var DefaultScenarioYAML []byte

// Scenario is everything one simulation needs: the fleet, the SLO, the
// control loop, the traffic and the policies' settings.
type Scenario struct {
	Name      string        `json:"name"`
	ModelID   string        `json:"modelID"`
	Namespace string        `json:"namespace"`
	Seed      uint64        `json:"seed"`
	Variants  []VariantSpec `json:"variants"`
	SLO       SLO           `json:"slo"`
	Control   Control       `json:"control"`
	Traffic   Traffic       `json:"traffic"`
	Policies  PolicyConfig  `json:"policies"`
}

// VariantSpec is one variant (one VariantAutoscaling and its Deployment).
type VariantSpec struct {
	Name        string `json:"name"`
	Accelerator string `json:"accelerator"`
	// Hardware says what one replica runs on: GPUs, precision, parallelism
	// and engine (e.g. "2 x H100 80GB, FP8, TP2, vLLM").
	Hardware string `json:"hardware,omitempty"`
	// Cost per replica-hour (the VA's variantCost).
	Cost            float64 `json:"cost"`
	MinReplicas     int32   `json:"minReplicas"`
	MaxReplicas     int32   `json:"maxReplicas"`
	InitialReplicas int32   `json:"initialReplicas"`
	// StartupDelay is pod creation to Ready (image pull, model load).
	StartupDelay params.Duration `json:"startupDelay"`
	Server       ServerSpec      `json:"server"`
}

// HardwareDescription is Hardware, or the accelerator when the scenario
// says no more.
func (v VariantSpec) HardwareDescription() string {
	if v.Hardware != "" {
		return v.Hardware
	}
	return v.Accelerator
}

// SLO is the per-request objective: TTFT (from arrival, queueing included)
// and average ITL at or below the targets. Attainment is the fraction of
// requests that must meet both (0.99).
type SLO struct {
	TTFT       params.Duration `json:"ttft"`
	ITL        params.Duration `json:"itl"`
	Attainment float64         `json:"attainment"`
}

// Control is the production control loop being emulated.
type Control struct {
	// Prometheus scrape interval and the max_over_time window of the
	// saturation queries.
	ScrapeInterval params.Duration `json:"scrapeInterval"`
	MetricsWindow  params.Duration `json:"metricsWindow"`
	// EngineInterval is the adapter's decision loop (--engine-interval).
	EngineInterval params.Duration `json:"engineInterval"`
	HPASyncPeriod  params.Duration `json:"hpaSyncPeriod"`
	// TerminationGrace: a deleted pod drains its requests this long; what
	// is left is retried on other pods.
	TerminationGrace params.Duration `json:"terminationGrace"`
	// ScaleFromZeroDelay: requests held at the gateway of a model at zero
	// replicas make the fast path scale its cheapest variant to 1 after this.
	ScaleFromZeroDelay params.Duration `json:"scaleFromZeroDelay"`
	// OracleInterval is the oracle's planning interval.
	OracleInterval params.Duration `json:"oracleInterval"`
	// InitialFleet is what the autoscaling policies start with: "warm"
	// (default) is the cheapest mix for the highest load of the minutes
	// the run plays first, before any scale-up could land (the mirrored
	// warm-up's from the trace's 10th minute back; see oracle.Plan.Warm),
	// as if the fleet had been running; "scenario" is each variant's
	// initialReplicas.
	InitialFleet string `json:"initialFleet,omitempty"`
	// Warmup is a pre-roll: the trace's first Warmup is played before the
	// measured run (not counted), so every policy starts the measured part
	// in its own steady state. Default 10m; negative disables it.
	Warmup params.Duration `json:"warmup,omitempty"`
	// WarmupMode is how the pre-roll plays the trace's first Warmup:
	// "mirror" (default) backwards, so it ends at the trace's start and the
	// measured run continues from it without a step; "replay" forward, so
	// it ends at the rate of the Warmup's end and the measured run starts
	// again at the trace's start.
	WarmupMode string `json:"warmupMode,omitempty"`
	// FlowControl makes the endpoint picker hold requests in its own
	// queue while every ready pod is saturated (llm-d flow control with the
	// saturation detector's defaults: 5 waiting requests or 80% KV cache),
	// instead of pushing them into vLLM queues.
	FlowControl bool `json:"flowControl,omitempty"`
}

// Initial fleet choices.
const (
	InitialFleetWarm     = "warm"
	InitialFleetScenario = "scenario"
)

// Warm-up modes.
const (
	WarmupReplay = "replay"
	WarmupMirror = "mirror"
)

// Traffic is a CSV trace (Azure LLM inference format) or a synthetic shape,
// optionally reshaped.
type Traffic struct {
	Trace     string     `json:"trace,omitempty"`
	Synthetic *Synthetic `json:"synthetic,omitempty"`
	// TimeScale multiplies arrival times (0.5 = twice as fast); RateScale
	// multiplies the request rate; Limit truncates (0 = whole trace).
	TimeScale float64         `json:"timeScale,omitempty"`
	RateScale float64         `json:"rateScale,omitempty"`
	Limit     params.Duration `json:"limit,omitempty"`
}

// PolicyConfig holds each policy's settings.
type PolicyConfig struct {
	WVA            WVAConfig            `json:"wva"`
	V1             V1Config             `json:"v1"`
	QueueThreshold QueueThresholdConfig `json:"queueThreshold"`
	KPA            KPAConfig            `json:"kpa"`
}

// WVAConfig is the data of wva's ConfigMaps (name -> key -> entry), exactly
// what the adapter reads: the analyzer is chosen there (analyzerName, or an
// entry in wva-queueing-model-config), so new analyzers need no simulator
// change. wva's latency targets are the scenario's slo (see WVAResolved).
type WVAConfig struct {
	ConfigMaps map[string]map[string]string `json:"configMaps"`
	// attainment, when set, is the sloAttainment wva plans for in place of
	// the configuration's: the --frontier sweep's knob.
	attainment float64
}

// SetAttainment sets the sloAttainment wva plans for in place of the
// configuration's (the yardstick, slo.attainment, stays).
func (c *WVAConfig) SetAttainment(v float64) { c.attainment = v }

// V1Config are the thresholds of the reference percentage analyzer.
type V1Config struct {
	KvCacheThreshold     float64 `json:"kvCacheThreshold"`
	QueueLengthThreshold float64 `json:"queueLengthThreshold"`
	KvSpareTrigger       float64 `json:"kvSpareTrigger"`
	QueueSpareTrigger    float64 `json:"queueSpareTrigger"`
}

// QueueThresholdConfig is the KEDA-style policy: the HPA keeps
// sum(num_requests_waiting) / replicas at the target.
type QueueThresholdConfig struct {
	TargetWaitingPerReplica float64 `json:"targetWaitingPerReplica"`
}

// KPAConfig is Knative's KPA: each variant is sized for
// targetConcurrency x targetUtilization requests in flight per pod.
type KPAConfig struct {
	// TargetConcurrency per pod (autoscaling.knative.dev/target); 0 is half
	// each variant's --max-num-seqs: a pod at the target holds half the
	// batch it can run, whatever the workload.
	TargetConcurrency float64 `json:"targetConcurrency,omitempty"`
	// TargetUtilization (default 0.7, Knative's
	// container-concurrency-target-percentage).
	TargetUtilization float64 `json:"targetUtilization,omitempty"`
}

// ParseScenario reads a scenario (YAML or JSON; unknown fields are errors)
// and fills defaults.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	s.ApplyDefaults()
	return s, s.Validate()
}

// DefaultScenario is the embedded scenario.
func DefaultScenario() Scenario {
	s, err := ParseScenario(DefaultScenarioYAML)
	if err != nil {
		panic("embedded default scenario: " + err.Error())
	}
	return s
}

// LoadScenario reads a scenario file.
func LoadScenario(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ApplyDefaults fills what the scenario leaves unset (ParseScenario does).
func (s *Scenario) ApplyDefaults() {
	if s.ModelID == "" {
		s.ModelID = "model"
	}
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	for i := range s.Variants {
		v := &s.Variants[i]
		v.Server = v.Server.WithDefaults()
		if v.Accelerator == "" {
			v.Accelerator = v.Name
		}
	}
	if s.SLO.Attainment == 0 {
		s.SLO.Attainment = 0.99
	}
	c := &s.Control
	def := func(d *params.Duration, v time.Duration) {
		if *d == 0 {
			*d = params.Duration(v)
		}
	}
	def(&c.ScrapeInterval, 15*time.Second)
	def(&c.MetricsWindow, time.Minute)
	def(&c.EngineInterval, 30*time.Second)
	def(&c.HPASyncPeriod, 15*time.Second)
	def(&c.TerminationGrace, 60*time.Second)
	def(&c.ScaleFromZeroDelay, time.Second)
	def(&c.OracleInterval, time.Minute)
	def(&c.Warmup, 10*time.Minute)
	if c.InitialFleet == "" {
		c.InitialFleet = InitialFleetWarm
	}
	if c.WarmupMode == "" {
		c.WarmupMode = WarmupMirror
	}
	if s.Traffic.TimeScale == 0 {
		s.Traffic.TimeScale = 1
	}
	if s.Traffic.RateScale == 0 {
		s.Traffic.RateScale = 1
	}
	v1 := &s.Policies.V1
	if *v1 == (V1Config{}) {
		*v1 = V1Config{KvCacheThreshold: 0.80, QueueLengthThreshold: 5, KvSpareTrigger: 0.10, QueueSpareTrigger: 3}
	}
	if s.Policies.QueueThreshold.TargetWaitingPerReplica == 0 {
		s.Policies.QueueThreshold.TargetWaitingPerReplica = 2
	}
	if s.Policies.KPA.TargetUtilization == 0 {
		s.Policies.KPA.TargetUtilization = 0.7
	}
}

// Validate names the first bad field; every number must lie in its range
// (bounds.go), so a run's memory and time stay bounded.
func (s Scenario) Validate() error {
	if len(s.Variants) == 0 {
		return fmt.Errorf("variants: at least one variant is needed")
	}
	if len(s.Variants) > MaxVariants {
		return fmt.Errorf("variants: %d variants: at most %d (the oracle searches every mix of them)", len(s.Variants), MaxVariants)
	}
	seen := map[string]bool{}
	for i, v := range s.Variants {
		at := fmt.Sprintf("variants[%d]", i)
		switch {
		case v.Name == "":
			return fmt.Errorf("%s.name: must be set", at)
		case seen[v.Name]:
			return fmt.Errorf("%s.name %q: duplicate", at, v.Name)
		}
		if err := costRange.check(at+".cost", v.Cost); err != nil {
			return err
		}
		if err := replicasRange.check(at+".maxReplicas", float64(v.MaxReplicas)); err != nil {
			return err
		}
		if err := (floatRange{lo: 0, hi: float64(v.MaxReplicas)}).check(at+".minReplicas", float64(v.MinReplicas)); err != nil {
			return err
		}
		if err := (floatRange{lo: float64(v.MinReplicas), hi: float64(v.MaxReplicas)}).check(at+".initialReplicas", float64(v.InitialReplicas)); err != nil {
			return err
		}
		if err := startupRange.check(at+".startupDelay", v.StartupDelay.D()); err != nil {
			return err
		}
		seen[v.Name] = true
		if err := v.Server.Validate(); err != nil {
			return prefixField(at, err)
		}
	}
	if n := MixSearch(s.Variants); n > MaxMixSearch {
		return fmt.Errorf("variants: the oracle would test up to %.3g fleets per interval (every mix of minReplicas..maxReplicas of "+
			"variants[1:], times the search steps on variants[0]): at most %d; narrow the replica ranges or drop variants", n, MaxMixSearch)
	}
	for _, f := range []struct {
		name string
		v    params.Duration
	}{{"slo.ttft", s.SLO.TTFT}, {"slo.itl", s.SLO.ITL}} {
		if err := sloLatencyRange.check(f.name, f.v.D()); err != nil {
			return err
		}
	}
	if err := attainmentRange.check("slo.attainment", s.SLO.Attainment); err != nil {
		return err
	}
	c := s.Control
	for _, d := range []struct {
		name string
		v    params.Duration
		r    durationRange
	}{
		{"scrapeInterval", c.ScrapeInterval, scrapeIntervalRange},
		{"metricsWindow", c.MetricsWindow, durationRange{c.ScrapeInterval.D(), controlIntervalRange.hi}},
		{"engineInterval", c.EngineInterval, controlIntervalRange},
		{"hpaSyncPeriod", c.HPASyncPeriod, controlIntervalRange},
		{"terminationGrace", c.TerminationGrace, terminationRange},
		{"scaleFromZeroDelay", c.ScaleFromZeroDelay, fromZeroDelayRange},
		{"oracleInterval", c.OracleInterval, oracleIntervalRange},
	} {
		if err := d.r.check("control."+d.name, d.v.D()); err != nil {
			return err
		}
	}
	if c.Warmup > 0 {
		if err := warmupRange.check("control.warmup", c.Warmup.D()); err != nil {
			return err
		}
	}
	if c := s.Control.InitialFleet; c != InitialFleetWarm && c != InitialFleetScenario {
		return fmt.Errorf("control.initialFleet %q: want %q or %q", c, InitialFleetWarm, InitialFleetScenario)
	}
	if m := s.Control.WarmupMode; m != WarmupReplay && m != WarmupMirror {
		return &FieldError{Field: "control.warmupMode", Err: fmt.Errorf("%q: want %q or %q", m, WarmupReplay, WarmupMirror)}
	}
	t := s.Traffic
	switch {
	case t.Trace == "" && t.Synthetic == nil:
		return fmt.Errorf("traffic: set trace (a CSV file) or synthetic")
	case t.Trace != "" && t.Synthetic != nil:
		return fmt.Errorf("traffic: set trace or synthetic, not both")
	case t.Synthetic != nil:
		if err := t.Synthetic.Validate(); err != nil {
			return err
		}
	}
	if err := timeScaleRange.check("traffic.timeScale", t.TimeScale); err != nil {
		return err
	}
	if err := rateScaleRange.check("traffic.rateScale", t.RateScale); err != nil {
		return err
	}
	if err := spanRange.check("traffic.limit", t.Limit.D()); err != nil {
		return err
	}
	if err := s.validatePolicies(); err != nil {
		return err
	}
	return nil
}

// prefixField puts a FieldError's field under prefix (variants[1] +
// server.alpha).
func prefixField(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: prefix + "." + fe.Field, Err: fe.Err}
	}
	return fmt.Errorf("%s.%w", prefix, err)
}

func (s Scenario) validatePolicies() error {
	if _, err := s.WVAResolver(); err != nil {
		return err
	}
	v := s.Policies.V1
	k := s.Policies.KPA
	for _, f := range []struct {
		name string
		v    float64
		r    floatRange
	}{
		{"v1.kvCacheThreshold", v.KvCacheThreshold, openFractionRange},
		{"v1.queueLengthThreshold", v.QueueLengthThreshold, queueTargetRange},
		{"v1.kvSpareTrigger", v.KvSpareTrigger, fractionRange},
		{"v1.queueSpareTrigger", v.QueueSpareTrigger, countRange},
		{"queueThreshold.targetWaitingPerReplica", s.Policies.QueueThreshold.TargetWaitingPerReplica, queueTargetRange},
		// 0: half of each variant's maxNumSeqs.
		{"kpa.targetConcurrency", k.TargetConcurrency, countRange},
		{"kpa.targetUtilization", k.TargetUtilization, openFractionRange},
	} {
		if err := f.r.check("policies."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// WVAResolver is what the wva policy resolves from: the store the adapter
// would build from the scenario's ConfigMaps, under the scenario's SLO.
type WVAResolver struct {
	store *config.Store
	slo   SLO
	// attainmentSet: an entry states sloAttainment, which then holds for
	// wva (the planner's margin may differ from the yardstick's).
	attainmentSet bool
	attainment    float64
}

// WVAResolver builds the store as the adapter does from its ConfigMaps. Any
// rejected entry is an error here: a benchmark must not silently run on
// defaults. The SLO is stated once, in slo: an entry may repeat
// targetTTFT or targetITL (older scenarios do) only with the same value.
func (s Scenario) WVAResolver() (WVAResolver, error) {
	c := WVAResolver{store: config.NewStore(), slo: s.SLO, attainment: s.Policies.WVA.attainment}
	for _, name := range slices.Sorted(maps.Keys(s.Policies.WVA.ConfigMaps)) {
		data := s.Policies.WVA.ConfigMaps[name]
		if err := c.store.Apply(name, data); err != nil {
			return c, fmt.Errorf("policies.wva.configMaps: %w", err)
		}
		if name != config.SaturationConfigMapName {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(data)) {
			var stated struct {
				TTFT       *float64 `json:"targetTTFT"`
				ITL        *float64 `json:"targetITL"`
				Attainment *float64 `json:"sloAttainment"`
			}
			if err := yaml.Unmarshal([]byte(data[key]), &stated); err != nil {
				return c, fmt.Errorf("policies.wva.configMaps: %s %q: %w", name, key, err)
			}
			for _, f := range []struct {
				key, field string
				v          *float64
				want       time.Duration
			}{{"targetTTFT", "slo.ttft", stated.TTFT, s.SLO.TTFT.D()}, {"targetITL", "slo.itl", stated.ITL, s.SLO.ITL.D()}} {
				if f.v != nil && *f.v != ms(f.want) {
					return c, fmt.Errorf("policies.wva.configMaps: %s %q: %s %g conflicts with %s %s: "+
						"the scenario states the SLO once, in %s (drop %s from the entry)", name, key, f.key, *f.v, f.field, f.want, f.field, f.key)
				}
			}
			c.attainmentSet = c.attainmentSet || stated.Attainment != nil
		}
	}
	r := c.Resolve(s.ModelID, s.Namespace)
	if err := config.Validate(r); err != nil {
		return c, fmt.Errorf("policies.wva: with slo %s/%s at %g: %w", s.SLO.TTFT, s.SLO.ITL, r.SLO.Attainment, err)
	}
	return c, nil
}

// Resolve is the configuration in force for a model: the ConfigMaps'
// resolution with the scenario's latency targets, and its attainment
// unless the ConfigMaps or the sweep set wva's own.
func (c WVAResolver) Resolve(modelID, namespace string) params.Resolved {
	r := c.store.Resolve(modelID, namespace)
	r.SLO.TargetTTFTms, r.SLO.TargetITLms = ms(c.slo.TTFT.D()), ms(c.slo.ITL.D())
	switch {
	case c.attainment > 0:
		r.SLO.Attainment = c.attainment
	case !c.attainmentSet:
		r.SLO.Attainment = c.slo.Attainment
	}
	return r
}

// WVAResolved is the configuration the wva policy runs the scenario's model
// with.
func (s Scenario) WVAResolved() (params.Resolved, error) {
	c, err := s.WVAResolver()
	if err != nil {
		return params.Resolved{}, err
	}
	return c.Resolve(s.ModelID, s.Namespace), nil
}

// ms is d in milliseconds, the unit of wva's targets.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// LoadTraffic builds the scenario's trace: reads the CSV or generates the
// synthetic shape, then reshapes it.
func (s Scenario) LoadTraffic() (trace.Trace, error) {
	var t trace.Trace
	var err error
	if s.Traffic.Trace != "" {
		f, oerr := os.Open(s.Traffic.Trace)
		if oerr != nil {
			return trace.Trace{}, oerr
		}
		defer f.Close()
		name := s.Traffic.Trace
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		t, err = trace.Parse(f, name)
		if err != nil {
			return trace.Trace{}, fmt.Errorf("%s: %w", s.Traffic.Trace, err)
		}
	} else {
		t, err = s.Traffic.Synthetic.Generate(s.Seed)
		if err != nil {
			return trace.Trace{}, err
		}
	}
	return t.Reshape(s.Traffic.TimeScale, s.Traffic.RateScale, s.Traffic.Limit.D(), s.Seed)
}

// VariantIndex is the index of the named variant, -1 when there is none.
func (s Scenario) VariantIndex(name string) int {
	for i, v := range s.Variants {
		if v.Name == name {
			return i
		}
	}
	return -1
}
