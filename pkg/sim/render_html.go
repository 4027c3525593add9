package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

var policyColors = map[string]string{
	PolicyWVA: "#1f77b4", PolicyWVAV1: "#ff7f0e", PolicyWVAThroughput: "#8c564b", PolicyQueueThreshold: "#2ca02c", PolicyKPA: "#d62728", PolicyStaticPeak: "#9467bd", PolicyOracle: "#555555",
}

var variantColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"}

func policyColor(name string) string {
	if c, ok := policyColors[name]; ok {
		return c
	}
	return "#000000"
}

// RenderHTML writes a self-contained report: the table and inline SVG
// charts (load, replicas per variant, KV usage, TTFT over time). No
// external script or style.
func RenderHTML(w io.Writer, rep Report) error {
	var b strings.Builder
	esc := html.EscapeString
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wva simulate</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
.meta{font-size:13px;color:#444;line-height:1.5}.note{font-size:12px;color:#666}
.grid{display:flex;flex-wrap:wrap;gap:8px}
svg{background:#fff}
</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>wva simulate: %s</h1>\n", esc(rep.Scenario))
	st := rep.Stats
	fmt.Fprintf(&b, `<div class="meta">Trace: %s: %d requests over %s, mean %.2f req/s, peak minute %.2f req/s, mean tokens in %.0f / out %.0f<br>`,
		esc(rep.Trace), st.Requests, st.Duration.Round(time.Second), st.MeanRate, st.PeakMinuteRate, st.MeanInputTokens, st.MeanOutputTokens)
	fmt.Fprintf(&b, "SLO: TTFT &le; %s and ITL &le; %s for %.1f%% of requests<br>", seconds(rep.SLO.TTFT), seconds(rep.SLO.ITL), 100*rep.SLO.Attainment)
	for i, v := range rep.Variants {
		fmt.Fprintf(&b, `Variant <span style="color:%s">&#9632;</span> %s (%s): cost %g per replica-hour, start-up %s<br>`,
			variantColors[i%len(variantColors)], esc(v.Name), esc(v.Accelerator), v.Cost, seconds(v.StartupDelay))
	}
	if rep.Analyzer != "" {
		fmt.Fprintf(&b, "wva analyzer: %s<br>", esc(rep.Analyzer))
	}
	b.WriteString("</div>\n<h2>Comparison</h2>\n<table><tr><th>policy</th><th>cost</th><th>x oracle</th><th>SLO met</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th><th>scale events</th><th>mean replicas</th><th>preemptions</th></tr>\n")
	for _, p := range rep.Policies {
		ratio := "-"
		if p.CostToOracle > 0 {
			ratio = fmt.Sprintf("%.2f", p.CostToOracle)
		}
		fmt.Fprintf(&b, `<tr><td><span style="color:%s">&#9632;</span> %s</td><td>%.1f</td><td>%s</td><td>%.2f%%</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td><td>%d</td></tr>`+"\n",
			policyColor(p.Policy), esc(p.Policy), p.Cost, ratio, 100*p.SLOAttainment, seconds(p.TTFTp50), seconds(p.TTFTp99),
			seconds(p.ITLp50), seconds(p.ITLp99), p.ScaleEvents, p.MeanReplicas, p.Preemptions)
	}
	b.WriteString("</table>\n")
	for _, p := range rep.Policies {
		if p.Note != "" {
			fmt.Fprintf(&b, `<div class="note">%s: %s</div>`+"\n", esc(p.Policy), esc(p.Note))
		}
	}
	xmax := rep.Horizon.Minutes()
	if len(rep.Policies) > 0 {
		first := rep.Policies[0].Timeline
		load := chartSeries{name: "arrivals", color: "#333", step: true}
		for _, tp := range minuteBuckets(first) {
			load.x = append(load.x, tp.minute)
			load.y = append(load.y, tp.rate)
		}
		b.WriteString("<h2>Load</h2>\n")
		b.WriteString(svgChart(chartSpec{title: "Arrival rate (requests/s, per minute)", xmax: xmax, width: 1000, height: 220}, []chartSeries{load}))
	}
	// Charts leave out the static-frontier rows (constant fleets, in the
	// table).
	b.WriteString("<h2>Replicas per variant</h2>\n<div class=\"grid\">\n")
	for _, p := range rep.Policies {
		if isFrontierRow(p.Policy) {
			continue
		}
		var ss []chartSeries
		for v := range rep.Variants {
			s := chartSeries{name: rep.Variants[v].Name, color: variantColors[v%len(variantColors)], step: true, stack: true}
			for _, tp := range p.Timeline {
				s.x = append(s.x, tp.Seconds/60)
				if v < len(tp.Replicas) {
					s.y = append(s.y, float64(tp.Replicas[v]))
				} else {
					s.y = append(s.y, 0)
				}
			}
			ss = append(ss, s)
		}
		b.WriteString(svgChart(chartSpec{title: p.Policy + ": replicas (spec) per variant, stacked", xmax: xmax, width: 490, height: 200}, ss))
	}
	b.WriteString("</div>\n")
	var total, kv, ttft []chartSeries
	for _, p := range rep.Policies {
		if isFrontierRow(p.Policy) {
			continue
		}
		c := policyColor(p.Policy)
		t := chartSeries{name: p.Policy, color: c, step: true, dashed: p.Policy == PolicyOracle}
		k := chartSeries{name: p.Policy, color: c}
		q := chartSeries{name: p.Policy, color: c}
		for _, tp := range p.Timeline {
			var n int32
			for _, r := range tp.Replicas {
				n += r
			}
			t.x, t.y = append(t.x, tp.Seconds/60), append(t.y, float64(n))
			k.x, k.y = append(k.x, tp.Seconds/60), append(k.y, tp.KVUsage)
			if tp.TTFTp99 > 0 {
				q.x, q.y = append(q.x, tp.Seconds/60), append(q.y, tp.TTFTp99)
			}
		}
		total, kv = append(total, t), append(kv, k)
		if p.Policy != PolicyOracle {
			ttft = append(ttft, q)
		}
	}
	b.WriteString("<h2>All policies</h2>\n")
	b.WriteString(svgChart(chartSpec{title: "Total replicas", xmax: xmax, width: 1000, height: 240, legend: true}, total))
	b.WriteString(svgChart(chartSpec{title: "KV cache usage (mean over ready pods)", xmax: xmax, width: 1000, height: 220, ymax: 1, legend: true}, kv))
	b.WriteString(svgChart(chartSpec{title: "TTFT p99 of requests finishing in each scrape interval (seconds, log scale; dashed: SLO)", xmax: xmax, width: 1000, height: 260,
		logY: true, hline: rep.SLO.TTFT, legend: true}, ttft))
	b.WriteString(`<p class="note">Generated by <code>wva simulate</code>. Cost counts every pod from creation (model load included) until it is gone. The oracle's cost is its plan's (perfect foresight, no start-up delay, each minute the cheapest fleet that meets the SLO with the backlog the previous minute leaves, repaired until the whole plan replayed meets it); its latencies come from replaying the plan. Its note gives the per-minute lower bound (each minute from an empty fleet).</p>`)
	b.WriteString("\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

type minutePoint struct{ minute, rate float64 }

func minuteBuckets(tl []TimePoint) []minutePoint {
	var out []minutePoint
	sum, n := 0.0, 0
	cur := -1
	for _, tp := range tl {
		if tp.At == 0 {
			continue
		}
		m := int((tp.At - 1) / time.Minute)
		if m != cur && n > 0 {
			out = append(out, minutePoint{float64(cur), sum / float64(n)})
			sum, n = 0, 0
		}
		cur = m
		sum += tp.ArrivalRate
		n++
	}
	if n > 0 {
		out = append(out, minutePoint{float64(cur), sum / float64(n)})
	}
	return out
}

type chartSeries struct {
	name   string
	color  string
	x, y   []float64
	step   bool
	stack  bool
	dashed bool
}

type chartSpec struct {
	title         string
	width, height int
	xmax, ymax    float64
	logY          bool
	hline         float64
	legend        bool
}

// svgChart draws x (minutes) against y; stacked series are drawn as
// areas on top of each other.
func svgChart(spec chartSpec, ss []chartSeries) string {
	const left, right, top, bottom = 48, 12, 26, 30
	pw, ph := float64(spec.width-left-right), float64(spec.height-top-bottom)
	if spec.legend {
		ph -= 16
	}
	// Stack.
	stacked := make([][]float64, len(ss))
	for i, s := range ss {
		stacked[i] = append([]float64(nil), s.y...)
		if s.stack && i > 0 && ss[i-1].stack {
			for j := range stacked[i] {
				if j < len(stacked[i-1]) {
					stacked[i][j] += stacked[i-1][j]
				}
			}
		}
	}
	ymax, ymin := spec.ymax, 0.0
	if ymax == 0 {
		for _, ys := range stacked {
			for _, y := range ys {
				ymax = math.Max(ymax, y)
			}
		}
		ymax = math.Max(ymax, spec.hline)
		ymax = niceCeil(ymax * 1.05)
	}
	if spec.logY {
		ymin = 0.01
		ymax = math.Max(ymax, 1)
		ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
	}
	xmax := math.Max(spec.xmax, 1e-9)
	X := func(x float64) float64 { return left + x/xmax*pw }
	Y := func(y float64) float64 {
		if spec.logY {
			y = math.Max(y, ymin)
			return top + ph - (math.Log10(y)-math.Log10(ymin))/(math.Log10(ymax)-math.Log10(ymin))*ph
		}
		if ymax <= 0 {
			return top + ph
		}
		return top + ph - y/ymax*ph
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`,
		spec.width, spec.height, spec.width, spec.height)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="12" font-weight="bold">%s</text>`, left, html.EscapeString(spec.title))
	// Grid and axes.
	var yticks []float64
	if spec.logY {
		for v := ymin; v <= ymax*1.0001; v *= 10 {
			yticks = append(yticks, v)
		}
	} else {
		step := niceStep(ymax / 4)
		for v := 0.0; v <= ymax+1e-9; v += step {
			yticks = append(yticks, v)
		}
	}
	for _, v := range yticks {
		y := Y(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`, left, y, left+pw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, y+4, trimFloat(v))
	}
	xstep := niceStep(xmax / 8)
	for v := 0.0; v <= xmax+1e-9; v += xstep {
		x := X(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`, x, top, x, top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, top+ph+14, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#666">minutes</text>`, left+pw, top+ph+26)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, left, top, pw, ph)
	// Series: stacked areas bottom-up, then lines.
	for i := len(ss) - 1; i >= 0; i-- {
		s := ss[i]
		if !s.stack || len(s.x) == 0 {
			continue
		}
		var pts []string
		for j := range s.x {
			if s.step && j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s.x[j]), Y(stacked[i][j-1])))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s.x[j]), Y(stacked[i][j])))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s.x[len(s.x)-1]), Y(0)), fmt.Sprintf("%.1f,%.1f", X(s.x[0]), Y(0)))
		fmt.Fprintf(&b, `<polygon points="%s" fill="%s" fill-opacity="0.85" stroke="none"/>`, strings.Join(pts, " "), s.color)
	}
	for _, s := range ss {
		if s.stack || len(s.x) == 0 {
			continue
		}
		var d strings.Builder
		for j := range s.x {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			} else if s.step {
				fmt.Fprintf(&d, "L%.1f,%.1f", X(s.x[j]), Y(s.y[j-1]))
			}
			fmt.Fprintf(&d, "%s%.1f,%.1f", cmd, X(s.x[j]), Y(s.y[j]))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.4"%s/>`, d.String(), s.color, dash)
	}
	if spec.hline > 0 {
		y := Y(spec.hline)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="6,4"/>`, left, y, left+pw, y)
	}
	if spec.legend {
		x := float64(left)
		for _, s := range ss {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`,
				x, float64(spec.height)-14, s.color, x+14, float64(spec.height)-5, html.EscapeString(s.name))
			x += 24 + 7*float64(len(s.name))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	s := niceStep(v / 5)
	return math.Ceil(v/s) * s
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}
