package main

import (
	"fmt"
	"strings"

	"github.com/wva-project/wva/pkg/sim/fleet"
)

// capacityMix is a traffic mix the capacity table measures one replica
// on: the requests `wva simulate` would play with args.
type capacityMix struct {
	name string
	args []string
}

// capacityMixes are the default hour's mix and the two Azure traces'.
var capacityMixes = []capacityMix{
	{"default (bursty hour)", nil},
	{"Azure conv", []string{"--trace", conv}},
	{"Azure code", []string{"--trace", code}},
}

// capacityTable runs `wva simulate capacity` on each of capacityMixes and
// renders each variant's rate at the SLO.
func capacityTable(wva func(...string) ([]byte, error)) (string, error) {
	reports := make([]fleet.CapacityReport, len(capacityMixes))
	for i, m := range capacityMixes {
		if err := wvaJSON(wva, &reports[i], append([]string{"simulate", "capacity", "--json"}, m.args...)...); err != nil {
			return "", err
		}
	}
	return renderCapacityTable(capacityMixes, reports), nil
}

// renderCapacityTable is the Markdown table of one replica's rate at the
// SLO per mix and variant, with what its requests show there.
func renderCapacityTable(mixes []capacityMix, reports []fleet.CapacityReport) string {
	var b strings.Builder
	b.WriteString("| traffic | mean tokens in / out | variant | req/s per replica at the SLO | SLO met | over TTFT / ITL | mean ITL ms | TPOT p99 ms |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i, rep := range reports {
		for _, v := range rep.Variants {
			p := v.AtSLO
			fmt.Fprintf(&b, "| %s | %.0f / %.0f | %s | %.2f | %.2f%% | %.2f%% / %.2f%% | %.1f | %.1f |\n", mixes[i].name, rep.MeanInput, rep.MeanOutput,
				v.Name, p.RequestRate, 100*p.SLOMet, 100*p.OverTTFT, 100*p.OverITL, p.ITLMs, p.TPOTP99Ms)
		}
	}
	return b.String()
}
