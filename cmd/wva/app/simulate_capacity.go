package app

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/snapshot"
)

type simulateCapacityOptions struct {
	sim     simulateOptions
	variant string
	rates   string
}

func newSimulateCapacityCommand() *cobra.Command {
	o := simulateCapacityOptions{}
	cmd := &cobra.Command{
		Use:   "capacity [--scenario F] [--trace F | --input-tokens N --output-tokens M] [--variant NAME] [--rates 1,2,4] [--json]",
		Short: "Find the request rate one replica of each variant serves within the SLO on a traffic mix",
		Long: `Drives one replica of each variant of the scenario (its server model) at Poisson
request rates, each request's prompt and output lengths drawn from the traffic
'wva simulate' would play with the same flags (a trace's requests, their timing
ignored, or the synthetic traffic's), and judges every request as the fleet
does: its TTFT and its own time per output token within the SLO's targets.
Prints the highest rate at which the share of requests within both reaches the
SLO's attainment (found by bisection to 1%), and the figures at each of --rates:
what one replica is worth to an autoscaler on that traffic, against which the
capacity an analyzer credits a replica can be checked. Requests one replica
cannot hold (over its KV cache) are left out and counted.`,
		Example: `  wva simulate capacity --trace examples/traces/azure-llm-inference-2023-conv.csv
  wva simulate capacity --input-tokens 1000 --output-tokens 200 --variant llama-70b-h100 --rates 4,5,6 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateCapacity(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.sim.scenario, "scenario", "", "scenario file (YAML/JSON); default: the embedded scenario")
	f.StringVar(&o.sim.trace, "trace", "", "CSV trace (TIMESTAMP,ContextTokens,GeneratedTokens) whose requests' lengths make the mix, instead of the scenario's traffic")
	f.Float64Var(&o.sim.inputTokens, "input-tokens", 0, "synthetic mean prompt length, tokens (default: the scenario's)")
	f.Float64Var(&o.sim.outputTokens, "output-tokens", 0, "synthetic mean output length, tokens (default: the scenario's)")
	f.DurationVar(&o.sim.duration, "duration", 0, "take the mix from the trace's (or the synthetic traffic's) first stretch of this length")
	f.DurationVar(&o.sim.sloTTFT, "slo-ttft", 0, "TTFT target (default: the scenario's)")
	f.DurationVar(&o.sim.sloITL, "slo-itl", 0, "ITL target (default: the scenario's)")
	f.Uint64Var(&o.sim.seed, "seed", 0, "random seed for the arrivals and the draws from the mix (default: the scenario's)")
	f.StringVar(&o.variant, "variant", "", "benchmark only this variant (default: every variant)")
	f.StringVar(&o.rates, "rates", "", "comma-separated request rates (req/s) to print the figures at, beside the rate at the SLO")
	f.BoolVar(&o.sim.jsonOut, "json", false, `print {"slo","mixRequests","meanInputTokens","meanOutputTokens","variants":[{"name","hardware","refused","atSLO","points":[...]}]} instead of the table`)
	return cmd
}

// parseRates reads "1,2.5,4".
func parseRates(list string) ([]float64, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []float64
	for _, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		r, err := strconv.ParseFloat(field, 64)
		if err != nil || !(r > 0 && r <= fleet.MaxBenchRate) {
			return nil, fmt.Errorf("--rates %s: each value must be a number of requests per second in (0, %v]", snapshot.QuotedName(field), fleet.MaxBenchRate)
		}
		out = append(out, r)
	}
	return out, nil
}

func runSimulateCapacity(cmd *cobra.Command, o simulateCapacityOptions) error {
	rates, err := parseRates(o.rates)
	if err != nil {
		return err
	}
	sc, err := buildScenario(cmd, o.sim)
	if err != nil {
		return err
	}
	tr, err := sc.LoadTraffic()
	if err != nil {
		return err
	}
	if len(tr.Requests) == 0 {
		return fmt.Errorf("the traffic has no requests to draw a mix from")
	}
	rep, err := fleet.CapacityScenario(sc, o.variant, fleet.Mix(tr.Requests), rates)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.sim.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "One replica at Poisson request rates, requests drawn from %s (%d requests, mean tokens in %.0f / out %.0f).\n",
		tr.Name, rep.Requests, rep.MeanInput, rep.MeanOutput)
	fmt.Fprintf(out, "SLO: TTFT <= %s and ITL <= %s for %.1f%% of requests.\n\n", sc.SLO.TTFT.D(), sc.SLO.ITL.D().Round(time.Millisecond), 100*sc.SLO.Attainment)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\trate req/s\tSLO met\tover TTFT\tover ITL\tTTFT ms\tITL ms\tTPOT p50 ms\tTPOT p99 ms\t")
	row := func(name string, p fleet.SLOPoint, mark string) {
		fmt.Fprintf(tw, "%s\t%.2f%s\t%.2f%%\t%.2f%%\t%.2f%%\t%.0f\t%.1f\t%.1f\t%.1f\t\n", name, p.RequestRate, mark,
			100*p.SLOMet, 100*p.OverTTFT, 100*p.OverITL, p.TTFTMs, p.ITLMs, p.TPOTP50Ms, p.TPOTP99Ms)
	}
	for _, v := range rep.Variants {
		row(v.Name, v.AtSLO, " (at the SLO)")
		for _, p := range v.Points {
			row(v.Name, p, "")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range rep.Variants {
		if v.Refused > 0 {
			fmt.Fprintf(out, "%s: %d requests of the mix exceed one replica's KV cache and are left out.\n", v.Name, v.Refused)
		}
	}
	return nil
}
