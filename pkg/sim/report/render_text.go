package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// RenderText writes the comparison table and a replicas-vs-load chart.
func RenderText(w io.Writer, rep sim.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario: %s\n", rep.Scenario)
	st := rep.Stats
	fmt.Fprintf(&b, "Trace:    %s: %d requests over %s, mean %.2f req/s, peak minute %.2f req/s, mean tokens in %.0f / out %.0f\n",
		rep.Trace, st.Requests, st.Duration.Round(time.Second), st.MeanRate, st.PeakMinuteRate, st.MeanInputTokens, st.MeanOutputTokens)
	fmt.Fprintf(&b, "SLO:      TTFT <= %s and ITL <= %s for %.1f%% of requests\n",
		seconds(rep.SLO.TTFT), seconds(rep.SLO.ITL), 100*rep.SLO.Attainment)
	var vs []string
	for _, v := range rep.Variants {
		vs = append(vs, fmt.Sprintf("%s (%s, cost %g/h, start-up %s)", v.Name, v.Accelerator, v.Cost, seconds(v.StartupDelay)))
	}
	fmt.Fprintf(&b, "Variants: %s\n", strings.Join(vs, ", "))
	if rep.Analyzer != "" {
		fmt.Fprintf(&b, "wva:      analyzer %s (from the scenario's ConfigMaps)\n", rep.Analyzer)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tCOST\tx ORACLE\tSLO MET\tTTFT p50\tTTFT p99\tITL p50\tITL p99\tSCALE EVENTS\tMEAN REPLICAS\tPEAK REPLICAS\tPREEMPTIONS")
	for _, p := range rep.Policies {
		ratio := "-"
		if p.CostToOracle > 0 {
			ratio = fmt.Sprintf("%.2f", p.CostToOracle)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%.2f%%\t%s\t%s\t%s\t%s\t%d\t%.1f\t%d\t%d\n", p.Policy, p.Cost, ratio, 100*p.SLOAttainment,
			seconds(p.TTFTp50), seconds(p.TTFTp99), seconds(p.ITLp50), seconds(p.ITLp99), p.ScaleEvents, p.MeanReplicas, p.MaxReplicas, p.Preemptions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range rep.Policies {
		if p.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", p.Policy, p.Note)
		}
	}
	if rep.Verdict != nil {
		fmt.Fprintf(&b, "  wva against the other rows (attainment capped at %.0f%%): %s\n", 100*rep.SLO.Attainment, rep.Verdict)
	}
	if hasFrontier(rep) {
		fmt.Fprintf(&b, "\nCost to reach 95%% / 99%% attainment over each policy's knob (--frontier; - never reached):\n")
		for _, p := range rep.Policies {
			if p.Frontier != nil {
				fmt.Fprintf(&b, "  %-16s %6s / %-6s (%s: %s)\n", frontierSeriesName(p), frontierCost(p.Frontier.CostAt95), frontierCost(p.Frontier.CostAt99), p.Frontier.Knob, points(p.Frontier))
			}
		}
		fmt.Fprintf(&b, "  wva among the adaptive policies: %s\n", FrontierRanking(rep))
	}
	b.WriteString("\n")
	b.WriteString(asciiChart(rep, 72, 14))
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds formats a number of seconds compactly (ms below 1 s).
func seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	case s < 60:
		return fmt.Sprintf("%.2fs", s)
	case s < 3600:
		return time.Duration(s * float64(time.Second)).Round(time.Second).String()
	default:
		return time.Duration(s * float64(time.Second)).Round(time.Minute).String()
	}
}

// policyMarks are the chart's marks, in drawing priority (first on top).
var policyMarks = map[string]byte{policies.PolicyWVA: 'W', policies.PolicyWVAV1: '1', policies.PolicyWVAThroughput: 't', policies.PolicyQueueThreshold: 'q', policies.PolicyKPA: 'k', policies.PolicyStaticPeak: 's', policies.PolicyOracle: 'o'}

// asciiChart draws total replicas per policy (one mark each) over the load
// (shaded, right axis). The static-frontier rows (flat lines) are left out.
func asciiChart(rep sim.Report, width, height int) string {
	if len(rep.Policies) == 0 || rep.Horizon <= 0 {
		return ""
	}
	col := func(t time.Duration) int { return min(int(float64(t)/float64(rep.Horizon)*float64(width)), width-1) }
	// Load per column: the mean arrival rate of the first policy's timeline
	// (arrivals are the same for every policy).
	load := make([]float64, width)
	count := make([]int, width)
	for _, tp := range rep.Policies[0].Timeline {
		if tp.At == 0 {
			continue
		}
		c := col(tp.At)
		load[c] += tp.ArrivalRate
		count[c]++
	}
	var maxLoad float64
	for c := range load {
		if count[c] > 0 {
			load[c] /= float64(count[c])
		}
		maxLoad = math.Max(maxLoad, load[c])
	}
	// Replicas per column: the maximum over the column.
	reps := map[string][]float64{}
	var maxRep float64 = 1
	for _, p := range rep.Policies {
		if oracle.IsFrontierRow(p.Policy) {
			continue
		}
		r := make([]float64, width)
		for c := range r {
			r[c] = -1
		}
		for _, tp := range p.Timeline {
			var n int32
			for _, x := range tp.Replicas {
				n += x
			}
			c := col(tp.At)
			r[c] = math.Max(r[c], float64(n))
		}
		for c := 1; c < width; c++ {
			if r[c] < 0 {
				r[c] = r[c-1]
			}
		}
		reps[p.Policy] = r
		for _, x := range r {
			maxRep = math.Max(maxRep, x)
		}
	}
	top := math.Ceil(maxRep)
	grid := make([][]byte, height)
	for y := range grid {
		grid[y] = []byte(strings.Repeat(" ", width))
	}
	rowOf := func(v, vmax float64) int {
		return height - 1 - min(int(math.Round(v/vmax*float64(height-1))), height-1)
	}
	if maxLoad > 0 {
		for c := range width {
			for y := rowOf(load[c], maxLoad); y < height; y++ {
				grid[y][c] = '.'
			}
		}
	}
	for i := len(rep.Policies) - 1; i >= 0; i-- {
		p := rep.Policies[i]
		if oracle.IsFrontierRow(p.Policy) {
			continue
		}
		mark, ok := policyMarks[p.Policy]
		if !ok {
			mark = '*'
		}
		for c, v := range reps[p.Policy] {
			if v >= 0 {
				grid[rowOf(v, top)][c] = mark
			}
		}
	}
	var b strings.Builder
	b.WriteString("Replicas (all variants) over time; '.' is the load (right axis)\n")
	for y := range height {
		left := top * float64(height-1-y) / float64(height-1)
		right := maxLoad * float64(height-1-y) / float64(height-1)
		fmt.Fprintf(&b, "%5.1f |%s| %5.1f\n", left, grid[y], right)
	}
	fmt.Fprintf(&b, "      +%s+ req/s\n", strings.Repeat("-", width))
	end := seconds(rep.Horizon.Seconds())
	fmt.Fprintf(&b, "       0%s%s\n", strings.Repeat(" ", max(1, width-len(end)-1)), end)
	var legend []string
	for _, p := range rep.Policies {
		if m, ok := policyMarks[p.Policy]; ok {
			legend = append(legend, fmt.Sprintf("%c %s", m, p.Policy))
		}
	}
	fmt.Fprintf(&b, "       %s\n", strings.Join(legend, "   "))
	return b.String()
}

func hasFrontier(rep sim.Report) bool {
	for _, p := range rep.Policies {
		if p.Frontier != nil {
			return true
		}
	}
	return false
}

// points lists a frontier's runs as knob=cost@attainment.
func points(f *sim.Frontier) string {
	if f.Knob == sim.StaticKnob {
		return fmt.Sprintf("%d fleets", len(f.Points))
	}
	parts := make([]string, len(f.Points))
	for i, p := range f.Points {
		parts[i] = fmt.Sprintf("%g: %.1f@%.1f%%", p.Knob, p.Cost, 100*p.Attainment)
	}
	return strings.Join(parts, ", ")
}
