package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/sim/fleet"
)

func TestRenderCapacityTable(t *testing.T) {
	mixes := []capacityMix{{"default (bursty hour)", nil}, {"Azure code", []string{"--trace", code}}}
	reports := []fleet.CapacityReport{
		{MeanInput: 993.4, MeanOutput: 199.2, Variants: []fleet.CapacityVariant{
			{Name: "l40s", AtSLO: fleet.SLOPoint{RequestRate: 4.004, SLOMet: 0.9907, OverTTFT: 0.0004, OverITL: 0.0089, ITLMs: 56.43, TPOTP99Ms: 98.21}},
			{Name: "h100", AtSLO: fleet.SLOPoint{RequestRate: 6.5625, SLOMet: 0.9903, OverTTFT: 0.0004, OverITL: 0.0093, ITLMs: 43.4, TPOTP99Ms: 98.8}},
		}},
		{MeanInput: 2048, MeanOutput: 28, Variants: []fleet.CapacityVariant{
			{Name: "h100", AtSLO: fleet.SLOPoint{RequestRate: 0.64, SLOMet: 0.99, OverITL: 0.01, ITLMs: 23, TPOTP99Ms: 99.9}},
		}},
	}
	want := "| traffic | mean tokens in / out | variant | req/s per replica at the SLO | SLO met | over TTFT / ITL | mean ITL ms | TPOT p99 ms |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| default (bursty hour) | 993 / 199 | l40s | 4.00 | 99.07% | 0.04% / 0.89% | 56.4 | 98.2 |\n" +
		"| default (bursty hour) | 993 / 199 | h100 | 6.56 | 99.03% | 0.04% / 0.93% | 43.4 | 98.8 |\n" +
		"| Azure code | 2048 / 28 | h100 | 0.64 | 99.00% | 0.00% / 1.00% | 23.0 | 99.9 |\n"
	assert.Equal(t, want, renderCapacityTable(mixes, reports))
}
