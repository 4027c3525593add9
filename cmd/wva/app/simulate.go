package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/report"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

type simulateOptions struct {
	scenario       string
	trace          string
	shape          string
	baseRate       float64
	peakRate       float64
	inputTokens    float64
	outputTokens   float64
	duration       time.Duration
	timeScale      float64
	rateScale      float64
	policies       string
	sloTTFT        time.Duration
	sloITL         time.Duration
	startupDelay   time.Duration
	engineInterval time.Duration
	seed           uint64
	wvaConfig      string
	flowControl    bool
	warmupMode     string
	jsonOut        bool
	htmlOut        string
	timelineOut    string
	explainOut     string
	frontier       bool
	progress       string
}

func newSimulateCommand() *cobra.Command {
	o := simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Simulate an LLM serving fleet under wva and other policies, and compare them with an oracle",
		Long: `Runs a discrete-event simulation of a vLLM-like serving fleet (continuous batching,
KV cache in blocks, chunked prefill, preemption) driven by the real decision
pipeline, Prometheus-style metric windows, the HPA and pod start-up delays, and
compares policies side by side: wva, wva-v1 (the reference percentage analyzer),
wva-throughput (upstream's throughput analyzer beside the percentage one),
queue-threshold (KEDA-style), kpa (Knative's KPA), static-peak, static-frontier
(one row per constant fleet on the cheapest-mix frontier) and the oracle (an
offline lower bound on cost).

Without flags it runs the embedded default scenario (two variants, a bursty hour).
Traces are CSV in the Azure LLM inference format (TIMESTAMP,ContextTokens,GeneratedTokens).`,
		Example: `  wva simulate
  wva simulate --html report.html
  wva simulate --trace examples/traces/azure-llm-inference-2023-conv.csv --json
  wva simulate --shape spike --policies wva,wva-v1,oracle`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.scenario, "scenario", "", "scenario file (YAML/JSON); default: the embedded scenario")
	f.StringVar(&o.trace, "trace", "", "CSV trace (TIMESTAMP,ContextTokens,GeneratedTokens) instead of the scenario's traffic")
	f.StringVar(&o.shape, "shape", "", "synthetic traffic shape instead of the scenario's: "+strings.Join(scenario.Shapes, ", "))
	f.Float64Var(&o.baseRate, "base-rate", 0, "synthetic base rate, requests/s (default: the scenario's)")
	f.Float64Var(&o.peakRate, "peak-rate", 0, "synthetic peak rate, requests/s (default: the scenario's)")
	f.Float64Var(&o.inputTokens, "input-tokens", 0, "synthetic mean prompt length, tokens (default: the scenario's)")
	f.Float64Var(&o.outputTokens, "output-tokens", 0, "synthetic mean output length, tokens (default: the scenario's)")
	f.DurationVar(&o.duration, "duration", 0, "truncate the trace (or the synthetic traffic's length)")
	f.Float64Var(&o.timeScale, "time-scale", 0, "multiply arrival times (0.5 plays the trace twice as fast)")
	f.Float64Var(&o.rateScale, "rate-scale", 0, "multiply the request rate (2 doubles the requests)")
	f.StringVar(&o.policies, "policies", strings.Join(policies.AllPolicies, ","), "policies to compare")
	f.DurationVar(&o.sloTTFT, "slo-ttft", 0, "TTFT target (default: the scenario's)")
	f.DurationVar(&o.sloITL, "slo-itl", 0, "ITL target (default: the scenario's)")
	f.DurationVar(&o.startupDelay, "startup-delay", 0, "pod start-up delay for every variant (default: per variant, from the scenario)")
	f.DurationVar(&o.engineInterval, "engine-interval", 0, "wva engine interval (default: the scenario's, 30s)")
	f.Uint64Var(&o.seed, "seed", 0, "random seed for synthetic traffic and rate scaling (default: the scenario's)")
	f.BoolVar(&o.flowControl, "flow-control", false, "endpoint picker holds requests while every pod is saturated (default: the scenario's)")
	f.StringVar(&o.warmupMode, "warmup-mode", "", "how the unmeasured warm-up plays the trace's first minutes: replay (forward, then the run starts again at the trace's start) or mirror (backwards, ending where the run starts) (default: the scenario's, mirror)")
	f.StringVar(&o.wvaConfig, "wva-config", "", "YAML of wva's ConfigMaps for the wva policy: {<ConfigMap name>: {<key>: <entry>}}")
	f.BoolVar(&o.jsonOut, "json", false, "print a machine-readable summary (one object per policy) instead of the table")
	f.StringVar(&o.htmlOut, "html", "", "also write a self-contained HTML report with charts to this file")
	f.StringVar(&o.timelineOut, "timeline", "", "also write every policy's timeline as CSV to this file: per scrape, arrivals, replicas and ready replicas per variant, queues, KV usage, TTFT and the requests over each target")
	f.StringVar(&o.explainOut, "explain", "", "also write wva's every engine cycle to this file as text, each line led by the simulated time: what its analyzer saw and planned (the lines the adapter logs) and each variant's target")
	f.BoolVar(&o.frontier, "frontier", false, "also sweep each policy's one knob (wva: sloAttainment; wva-v1, wva-throughput: kvCacheThreshold; queue-threshold, kpa: their targets) and report its cost to reach 95% and 99% attainment (with --html, also a chart of cost against attainment)")
	f.StringVar(&o.progress, "progress", "auto", "progress bar on standard error: auto (when a terminal), always, never")
	cmd.AddCommand(newSimulateReplicaCommand())
	cmd.AddCommand(newSimulateCapacityCommand())
	cmd.AddCommand(newSimulateCalibrateCommand())
	cmd.AddCommand(newSimulateServegenCommand())
	return cmd
}

func runSimulate(cmd *cobra.Command, o simulateOptions) error {
	sc, err := buildScenario(cmd, o)
	if err != nil {
		return err
	}
	names, err := policies.ParsePolicies(o.policies)
	if err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	if o.explainOut != "" && !slices.Contains(names, policies.PolicyWVA) {
		// Said before the simulation, not after minutes of it.
		return fmt.Errorf("--explain writes wva's decisions: add wva to --policies (%s)", strings.Join(names, ","))
	}
	trace, err := sc.LoadTraffic()
	if err != nil {
		return err
	}
	if len(trace.Requests) == 0 {
		return fmt.Errorf("the traffic has no requests")
	}
	bar := newProgressBar(cmd.ErrOrStderr(), o.progress)
	rep, err := sim.Run(sc, trace, sim.Options{Policies: names, Progress: bar.update, Explain: o.explainOut != ""})
	bar.done()
	if err != nil {
		return err
	}
	if o.frontier {
		if err := sim.SweepFrontiers(sc, trace, &rep); err != nil {
			return err
		}
	}
	if o.htmlOut != "" {
		if err := writeFile(o.htmlOut, func(w io.Writer) error { return report.RenderHTML(w, rep) }); err != nil {
			return err
		}
	}
	if o.timelineOut != "" {
		if err := writeFile(o.timelineOut, func(w io.Writer) error { return report.RenderTimelineCSV(w, rep) }); err != nil {
			return err
		}
	}
	if o.explainOut != "" {
		if len(rep.Decisions) == 0 {
			return fmt.Errorf("--explain: wva made no decisions (is wva among --policies?)")
		}
		if err := writeFile(o.explainOut, func(w io.Writer) error { return report.RenderDecisions(w, rep) }); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if o.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := report.RenderText(out, rep); err != nil {
		return err
	}
	if o.htmlOut != "" {
		fmt.Fprintf(out, "\nHTML report: %s\n", o.htmlOut)
	}
	fmt.Fprintf(out, "\nSimulated in %.2fs.\n", rep.Elapsed)
	return nil
}

// writeFile creates path and writes it with render.
func writeFile(path string, render func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := render(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scenarioFile is the scenario at path, or the embedded default when path
// is empty (--scenario of every simulate command).
func scenarioFile(path string) (scenario.Scenario, error) {
	if path == "" {
		return scenario.DefaultScenario(), nil
	}
	return scenario.LoadScenario(path)
}

func buildScenario(cmd *cobra.Command, o simulateOptions) (scenario.Scenario, error) {
	sc, err := scenarioFile(o.scenario)
	if err != nil {
		return sc, err
	}
	changed := cmd.Flags().Changed
	if o.trace != "" && o.shape != "" {
		return sc, fmt.Errorf("--trace and --shape: give one")
	}
	if o.trace != "" {
		sc.Traffic.Trace, sc.Traffic.Synthetic = o.trace, nil
	}
	if o.trace != "" && (changed("input-tokens") || changed("output-tokens")) {
		return sc, fmt.Errorf("--input-tokens and --output-tokens shape synthetic traffic: a trace has its own")
	}
	if o.shape != "" || changed("base-rate") || changed("peak-rate") || changed("input-tokens") || changed("output-tokens") {
		if sc.Traffic.Synthetic == nil {
			def := scenario.DefaultScenario()
			sc.Traffic.Synthetic = def.Traffic.Synthetic
		}
		syn := *sc.Traffic.Synthetic
		if o.shape != "" {
			syn.Shape = o.shape
			syn.SpikeStart, syn.SpikeLength = 0, 0
		}
		if changed("base-rate") {
			syn.BaseRate = o.baseRate
		}
		if changed("peak-rate") {
			syn.PeakRate = o.peakRate
		}
		if changed("input-tokens") {
			syn.InputTokens = o.inputTokens
		}
		if changed("output-tokens") {
			syn.OutputTokens = o.outputTokens
		}
		sc.Traffic.Trace, sc.Traffic.Synthetic = "", &syn
	}
	if changed("duration") {
		if o.duration <= 0 {
			return sc, fmt.Errorf("--duration %s: must be > 0", o.duration)
		}
		if sc.Traffic.Synthetic != nil {
			syn := *sc.Traffic.Synthetic
			syn.Duration = params.Duration(o.duration)
			syn.SpikeStart, syn.SpikeLength = 0, 0
			sc.Traffic.Synthetic = &syn
		} else {
			sc.Traffic.Limit = params.Duration(o.duration)
		}
	}
	if changed("time-scale") {
		sc.Traffic.TimeScale = o.timeScale
	}
	if changed("rate-scale") {
		sc.Traffic.RateScale = o.rateScale
	}
	if changed("slo-ttft") {
		sc.SLO.TTFT = params.Duration(o.sloTTFT)
	}
	if changed("slo-itl") {
		sc.SLO.ITL = params.Duration(o.sloITL)
	}
	if changed("startup-delay") {
		if o.startupDelay < 0 {
			return sc, fmt.Errorf("--startup-delay %s: must be >= 0", o.startupDelay)
		}
		for i := range sc.Variants {
			sc.Variants[i].StartupDelay = params.Duration(o.startupDelay)
		}
	}
	if changed("engine-interval") {
		sc.Control.EngineInterval = params.Duration(o.engineInterval)
	}
	if changed("flow-control") {
		sc.Control.FlowControl = o.flowControl
	}
	if changed("warmup-mode") {
		sc.Control.WarmupMode = o.warmupMode
	}
	if changed("seed") {
		sc.Seed = o.seed
	}
	if o.wvaConfig != "" {
		data, err := os.ReadFile(o.wvaConfig)
		if err != nil {
			return sc, err
		}
		var cms map[string]map[string]string
		if err := yaml.UnmarshalStrict(data, &cms); err != nil {
			return sc, fmt.Errorf("--wva-config %s: want {<ConfigMap name>: {<key>: <entry>}}: %w", o.wvaConfig, err)
		}
		sc.Policies.WVA.ConfigMaps = cms
	}
	if err := sc.Validate(); err != nil {
		return sc, flagError(changed, err)
	}
	return sc, nil
}

// fieldFlags are the scenario fields the flags set.
var fieldFlags = map[string]string{
	"traffic.synthetic.baseRate":     "base-rate",
	"traffic.synthetic.peakRate":     "peak-rate",
	"traffic.synthetic.inputTokens":  "input-tokens",
	"traffic.synthetic.outputTokens": "output-tokens",
	"traffic.synthetic.duration":     "duration",
	"traffic.limit":                  "duration",
	"traffic.timeScale":              "time-scale",
	"traffic.rateScale":              "rate-scale",
	"slo.ttft":                       "slo-ttft",
	"slo.itl":                        "slo-itl",
	"control.engineInterval":         "engine-interval",
	"control.warmupMode":             "warmup-mode",
	"startupDelay":                   "startup-delay", // of every variant
}

// flagError names the flag that set the field a validation error is about.
func flagError(changed func(string) bool, err error) error {
	var fe *scenario.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	field := fe.Field
	if i := strings.LastIndex(field, "]."); i >= 0 && strings.HasPrefix(field, "variants[") {
		field = field[i+2:]
	}
	if flag, ok := fieldFlags[field]; ok && changed(flag) {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	return err
}

// progressBar draws on standard error when it is a terminal (or when
// forced); updates come from several goroutines.
type progressBar struct {
	w       io.Writer
	enabled bool
	last    int
	ch      chan float64
	fin     chan struct{}
}

func newProgressBar(w io.Writer, mode string) *progressBar {
	enabled := false
	switch mode {
	case "always":
		enabled = true
	case "never":
	default:
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				enabled = true
			}
		}
	}
	b := &progressBar{w: w, enabled: enabled, last: -1}
	if enabled {
		b.ch = make(chan float64, 64)
		b.fin = make(chan struct{})
		go func() {
			defer close(b.fin)
			for x := range b.ch {
				b.draw(x)
			}
		}()
	}
	return b
}

func (b *progressBar) update(x float64) {
	if !b.enabled {
		return
	}
	select {
	case b.ch <- x:
	default: // drop an update rather than slow the simulation
	}
}

func (b *progressBar) draw(x float64) {
	pct := int(decision.Clamp01(x) * 100)
	if pct == b.last {
		return
	}
	b.last = pct
	const width = 40
	filled := pct * width / 100
	fmt.Fprintf(b.w, "\rsimulating [%s%s] %3d%%", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct)
}

func (b *progressBar) done() {
	if !b.enabled {
		return
	}
	close(b.ch)
	<-b.fin
	fmt.Fprint(b.w, "\r\033[K")
}
