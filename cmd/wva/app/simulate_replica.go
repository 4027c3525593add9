package app

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/snapshot"
)

type simulateReplicaOptions struct {
	scenario     string
	variant      string
	inputTokens  int32
	outputTokens int32
	concurrency  string
	jsonOut      bool
}

func newSimulateReplicaCommand() *cobra.Command {
	o := simulateReplicaOptions{}
	cmd := &cobra.Command{
		Use:   "replica [--scenario F] [--variant NAME] --input-tokens N --output-tokens M --concurrency 1,5,25,50 [--json]",
		Short: "Benchmark one replica of each variant at fixed concurrency, as AIPerf or vllm bench serve do",
		Long: `Drives one replica of each variant of the scenario (its server model) at each
fixed concurrency: every client sends a request of --input-tokens prompt and
--output-tokens output tokens, waits for its last token and sends the next.
Prints mean TTFT, mean inter-token latency and output tokens/s per point, the
figures AIPerf, genai-perf and 'vllm bench serve --max-concurrency' report, so
the simulated fleet can be checked against published or measured tables.`,
		Example: `  wva simulate replica --input-tokens 5000 --output-tokens 500 --concurrency 1,5,25,50
  wva simulate replica --variant llama-70b-h100 --input-tokens 500 --output-tokens 2000 --concurrency 1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateReplica(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.scenario, "scenario", "", "scenario file (YAML/JSON); default: the embedded scenario")
	f.StringVar(&o.variant, "variant", "", "benchmark only this variant (default: every variant)")
	f.Int32Var(&o.inputTokens, "input-tokens", 0, "prompt tokens of every request")
	f.Int32Var(&o.outputTokens, "output-tokens", 0, "output tokens of every request")
	f.StringVar(&o.concurrency, "concurrency", "", "comma-separated concurrencies, e.g. 1,5,25,50")
	f.BoolVar(&o.jsonOut, "json", false, `print {"variants":[{"name","hardware","points":[...]}]} instead of the table`)
	for _, name := range []string{"input-tokens", "output-tokens", "concurrency"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// parseConcurrencies reads "1,5,25,50".
func parseConcurrencies(list string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		c, err := strconv.Atoi(field)
		if err != nil || c < 1 || c > fleet.MaxBenchConcurrency {
			return nil, fmt.Errorf("--concurrency %s: each value must be an integer in [1, %d]", snapshot.QuotedName(field), fleet.MaxBenchConcurrency)
		}
		out = append(out, c)
	}
	return out, nil
}

func runSimulateReplica(cmd *cobra.Command, o simulateReplicaOptions) error {
	concurrencies, err := parseConcurrencies(o.concurrency)
	if err != nil {
		return err
	}
	sc, err := scenarioFile(o.scenario)
	if err != nil {
		return err
	}
	rep, err := fleet.BenchScenario(sc, o.variant, o.inputTokens, o.outputTokens, concurrencies)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "One replica at fixed concurrency, %d input / %d output tokens per request.\n\n", o.inputTokens, o.outputTokens)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\thardware\tconcurrency\tTTFT ms\tITL ms\toutput tok/s\t")
	for _, v := range rep.Variants {
		for _, p := range v.Points {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%.1f\t\n", v.Name, v.Hardware, p.Concurrency, p.TTFTMs, p.ITLMs, p.OutputTokensPerSecond)
		}
	}
	return tw.Flush()
}
