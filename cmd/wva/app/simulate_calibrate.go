package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/sim/calibrate"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

type simulateCalibrateOptions struct {
	from                []string
	scenario            string
	variant             string
	additive            bool
	tolerance           float64
	numGPUBlocks        int32
	maxNumSeqs          int32
	maxNumBatchedTokens int32
	jsonOut             bool
}

func newSimulateCalibrateCommand() *cobra.Command {
	o := simulateCalibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate --from FILE [--from FILE...] [--scenario F] [--variant NAME] [--json]",
		Short: "Fit a variant's service model to your own benchmark results",
		Long: `Reads benchmark runs at fixed concurrency or request rate (the JSON 'vllm bench serve
--save-result' writes, one run per file or one per line with --append-result,
and AIPerf/genai-perf profile exports) and fits the service model of one
replica to them: the step costs overhead, alpha, beta and gamma of the
roofline step overhead + max(alpha + gamma x KV tokens, beta x batched tokens).
The KV cache and scheduler limits are the variant's in the scenario, or the
flags. Prints the fitted server block to paste into a scenario and every
point's error; fails, after printing them, when a point is further than
--tolerance from the fit: the model cannot reproduce that measurement.`,
		Example: `  wva simulate calibrate --from results-c1.json --from results-c25.json --variant llama-70b-h100
  wva simulate calibrate --from profile_export_aiperf.json --num-gpu-blocks 26474 --max-num-batched-tokens 8192`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateCalibrate(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.from, "from", nil, "benchmark results file (repeatable): vllm bench serve --save-result JSON, or an AIPerf/genai-perf profile export")
	f.StringVar(&o.scenario, "scenario", "", "scenario whose variant gives the KV cache and scheduler limits (default: the embedded scenario)")
	f.StringVar(&o.variant, "variant", "", "the variant whose limits the fit keeps (default: the scenario's first)")
	f.BoolVar(&o.additive, "additive", false, "fit the additive step alpha + beta x batched + gamma x KV instead of the roofline")
	f.Float64Var(&o.tolerance, "tolerance", 0.15, "largest relative error a point may keep on TTFT, ITL or output tokens/s")
	f.Int32Var(&o.numGPUBlocks, "num-gpu-blocks", 0, "the replica's KV cache in blocks (vLLM logs it as '# GPU blocks'); default: the variant's")
	f.Int32Var(&o.maxNumSeqs, "max-num-seqs", 0, "vLLM --max-num-seqs of the benchmarked server; default: the variant's")
	f.Int32Var(&o.maxNumBatchedTokens, "max-num-batched-tokens", 0, "vLLM --max-num-batched-tokens of the benchmarked server; default: the variant's")
	f.BoolVar(&o.jsonOut, "json", false, `print {"server":{...},"points":[...]} instead of the snippet and table`)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// calibrateReport is the --json output.
type calibrateReport struct {
	Server scenario.ServerSpec  `json:"server"`
	Points []calibrate.PointFit `json:"points"`
	Worst  float64              `json:"worstError"`
}

func runSimulateCalibrate(cmd *cobra.Command, o simulateCalibrateOptions) error {
	if !(o.tolerance > 0 && o.tolerance < 10) {
		return fmt.Errorf("--tolerance %v: must be in (0, 10)", o.tolerance)
	}
	var points []calibrate.Point
	for _, name := range o.from {
		data, err := readResults(name)
		if err != nil {
			return err
		}
		p, err := calibrate.Parse(name, data)
		if err != nil {
			return err
		}
		points = append(points, p...)
	}
	base, err := calibrationBase(o)
	if err != nil {
		return err
	}
	model := func(p calibrate.Params, pt calibrate.Point) (calibrate.Predicted, error) {
		spec := withParams(base, p)
		in, out := int32(math.Round(pt.InputTokens)), int32(math.Round(pt.OutputTokens))
		var r fleet.ReplicaPoint
		var err error
		if pt.Concurrency > 0 {
			r, err = fleet.BenchReplica(spec, in, out, pt.Concurrency)
		} else {
			r, err = fleet.BenchReplicaRate(spec, in, out, pt.RequestRate)
		}
		return calibrate.Predicted{TTFTMs: r.TTFTMs, ITLMs: r.ITLMs, OutputTokensPerSecond: r.OutputTokensPerSecond}, err
	}
	res, err := calibrate.Fit(points, model, !o.additive)
	if err != nil {
		return err
	}
	rep := calibrateReport{Server: withParams(base, res.Params), Points: res.Points, Worst: res.Worst()}
	out := cmd.OutOrStdout()
	if o.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := printCalibration(out, rep); err != nil {
		return err
	}
	for _, p := range res.Points {
		if p.Worst() > o.tolerance {
			return fmt.Errorf("%s (%s, %.0f/%.0f tokens): the fit is %.0f%% off (TTFT %+.0f%%, ITL %+.0f%%, output tokens/s %+.0f%%), more than --tolerance %.0f%%: the service model cannot reproduce this measurement",
				p.Point.Source, loadOf(p.Point), p.Point.InputTokens, p.Point.OutputTokens, 100*p.Worst(),
				100*p.TTFTError, 100*p.ITLError, 100*p.ThroughputError, 100*o.tolerance)
		}
	}
	return nil
}

// calibrationBase is the server whose limits the fit keeps.
func calibrationBase(o simulateCalibrateOptions) (scenario.ServerSpec, error) {
	sc, err := scenarioFile(o.scenario)
	if err != nil {
		return scenario.ServerSpec{}, err
	}
	if len(sc.Variants) == 0 {
		return scenario.ServerSpec{}, errors.New("the scenario has no variant")
	}
	base := sc.Variants[0].Server
	if o.variant != "" {
		i := sc.VariantIndex(o.variant)
		if i < 0 {
			return scenario.ServerSpec{}, fmt.Errorf("--variant %q: not a variant of the scenario", o.variant)
		}
		base = sc.Variants[i].Server
	}
	if o.numGPUBlocks != 0 {
		base.NumGPUBlocks = o.numGPUBlocks
	}
	if o.maxNumSeqs != 0 {
		base.MaxNumSeqs = o.maxNumSeqs
	}
	if o.maxNumBatchedTokens != 0 {
		base.MaxNumBatchedTokens = o.maxNumBatchedTokens
	}
	return base.WithDefaults(), nil
}

func withParams(s scenario.ServerSpec, p calibrate.Params) scenario.ServerSpec {
	s.Overhead, s.Alpha, s.Beta, s.Gamma = p.Overhead, p.Alpha, p.Beta, p.Gamma
	return s
}

// readResults reads a results file, at most one byte past what
// calibrate.Parse accepts, so Parse refuses an oversized file without the
// whole of it in memory.
func readResults(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, calibrate.MaxResultBytes+1))
}

func printCalibration(w interface{ Write([]byte) (int, error) }, rep calibrateReport) error {
	s := rep.Server
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	fmt.Fprintf(w, "server: {overhead: %s, alpha: %s, beta: %s, gamma: %s, numGPUBlocks: %d, blockSize: %d, maxNumSeqs: %d, maxNumBatchedTokens: %d}\n\n",
		g(s.Overhead), g(s.Alpha), g(s.Beta), g(s.Gamma), s.NumGPUBlocks, s.BlockSize, s.MaxNumSeqs, s.MaxNumBatchedTokens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tload\tin/out\tTTFT ms (fit)\tITL ms (fit)\toutput tok/s (fit)\tworst\t")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.0f/%.0f\t%.1f (%.1f)\t%.2f (%.2f)\t%.1f (%.1f)\t%.1f%%\t\n", filepath.Base(p.Point.Source), loadOf(p.Point),
			p.Point.InputTokens, p.Point.OutputTokens, p.Point.TTFTMs, p.Predicted.TTFTMs, p.Point.ITLMs, p.Predicted.ITLMs,
			p.Point.OutputTokensPerSecond, p.Predicted.OutputTokensPerSecond, 100*p.Worst())
	}
	return tw.Flush()
}

// loadOf says how a run was driven: "c=25" or "2.5 req/s".
func loadOf(p calibrate.Point) string {
	if p.Concurrency > 0 {
		return fmt.Sprintf("c=%d", p.Concurrency)
	}
	return strconv.FormatFloat(p.RequestRate, 'g', 4, 64) + " req/s"
}
