package report

import (
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// TestRenderHTMLFrontier renders reports with and without frontiers: with
// one, a well-formed SVG chart has one series per swept policy with a dot
// per run, wva's drawn bold, the 95% and 99% marks and both axis labels.
func TestRenderHTMLFrontier(t *testing.T) {
	sweep := func(knob string, n int, cost float64) *sim.Frontier {
		f := &sim.Frontier{Knob: knob}
		for i := range n {
			f.Points = append(f.Points, sim.FrontierPoint{Knob: float64(i), Cost: cost + 5*float64(i), Attainment: 0.82 + 0.03*float64(i)})
		}
		f.Fill()
		return f
	}
	cases := []struct {
		name   string
		rows   []sim.PolicySummary
		series map[string]int // series name -> points; nil: no chart
		xmin   string         // the x axis's first tick
	}{
		{"no frontier", []sim.PolicySummary{{Policy: policies.PolicyWVA}, {Policy: policies.PolicyKPA}}, nil, ""},
		{"swept policies and the constant fleets", []sim.PolicySummary{
			{Policy: policies.PolicyWVA, Frontier: sweep("sloAttainment", 6, 20)},
			{Policy: policies.PolicyKPA, Frontier: sweep("targetUtilization", 6, 25)},
			{Policy: policies.PolicyStaticPeak, Frontier: sweep(sim.StaticKnob, 3, 30)},
			{Policy: "static:2xl40s+1xa100"},
			{Policy: policies.PolicyOracle},
		}, map[string]int{policies.PolicyWVA: 6, policies.PolicyKPA: 6, "constant fleets": 3}, "80"},
		{"a name with markup is text", []sim.PolicySummary{
			{Policy: "<b>mine</b>", Frontier: &sim.Frontier{Knob: "x", Points: []sim.FrontierPoint{{Cost: 3, Attainment: 0.05}}}},
		}, map[string]int{"&lt;b&gt;mine&lt;/b&gt;": 1}, "0"},
	}
	seriesRE := regexp.MustCompile(`<g class="series" data-series="([^"]*)">(.*?)</g>`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, RenderHTML(&b, sim.Report{Scenario: "s", Policies: tc.rows}))
			out := b.String()
			_, chart, found := strings.Cut(out, "<h2>Cost against attainment (--frontier)</h2>")
			if tc.series == nil {
				assert.False(t, found, "no frontier chart without a frontier")
				assert.NotContains(t, out, "SLO attainment %")
				return
			}
			require.True(t, found)
			chart, _, ok := strings.Cut(chart, "</svg>")
			require.True(t, ok)
			chart = strings.TrimSpace(chart) + "</svg>"
			dec := xml.NewDecoder(strings.NewReader(chart))
			for {
				_, err := dec.Token()
				if err == io.EOF {
					break
				}
				require.NoError(t, err, "the chart is well-formed XML")
			}
			got := map[string]int{}
			for _, m := range seriesRE.FindAllStringSubmatch(chart, -1) {
				got[m[1]] = strings.Count(m[2], "<circle")
				if m[1] == policies.PolicyWVA {
					assert.Contains(t, m[2], `stroke-width="3"`, "wva is bold")
				} else {
					assert.Contains(t, m[2], `stroke-width="1.4"`)
				}
			}
			assert.Equal(t, tc.series, got)
			for _, want := range []string{">SLO attainment %</text>", ">cost</text>", ">95%</text>", ">99%</text>", ">" + tc.xmin + "</text>", ">100</text>"} {
				assert.Contains(t, chart, want)
			}
			assert.NotContains(t, out, "<b>")
		})
	}
}
