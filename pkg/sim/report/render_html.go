package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
)

var policyColors = map[string]string{
	policies.PolicyWVA: "#1f77b4", policies.PolicyWVAV1: "#ff7f0e", policies.PolicyWVAThroughput: "#8c564b", policies.PolicyQueueThreshold: "#2ca02c", policies.PolicyKPA: "#d62728", policies.PolicyStaticPeak: "#9467bd", policies.PolicyOracle: "#555555",
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
// external script or style. html/template escapes every value (scenario,
// policy and variant names come from user files).
func RenderHTML(w io.Writer, rep sim.Report) error {
	view := reportView{Report: rep}
	for i, v := range rep.Variants {
		view.VariantRows = append(view.VariantRows, variantView{VariantBrief: v, Color: variantColors[i%len(variantColors)]})
	}
	for _, p := range rep.Policies {
		view.PolicyRows = append(view.PolicyRows, rowView{PolicySummary: p, Color: policyColor(p.Policy)})
	}
	xmax := rep.Horizon.Minutes()
	if len(rep.Policies) > 0 {
		first := rep.Policies[0].Timeline
		load := chartSeries{name: "arrivals", color: "#333", step: true}
		for _, tp := range minuteBuckets(first) {
			load.x = append(load.x, tp.minute)
			load.y = append(load.y, tp.rate)
		}
		c := svgChart(chartSpec{title: "Arrival rate (requests/s, per minute)", xmax: xmax, width: 1000, height: 220}, []chartSeries{load})
		view.Load = &c
	}
	// Charts leave out the static-frontier rows (constant fleets, in the
	// table).
	for _, p := range rep.Policies {
		if oracle.IsFrontierRow(p.Policy) {
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
		view.Replicas = append(view.Replicas, svgChart(chartSpec{title: p.Policy + ": replicas (spec) per variant, stacked", xmax: xmax, width: 490, height: 200}, ss))
	}
	var total, kv, ttft []chartSeries
	for _, p := range rep.Policies {
		if oracle.IsFrontierRow(p.Policy) {
			continue
		}
		c := policyColor(p.Policy)
		t := chartSeries{name: p.Policy, color: c, step: true, dashed: p.Policy == policies.PolicyOracle}
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
		if p.Policy != policies.PolicyOracle {
			ttft = append(ttft, q)
		}
	}
	view.All = []chartView{
		svgChart(chartSpec{title: "Total replicas", xmax: xmax, width: 1000, height: 240, legend: true}, total),
		svgChart(chartSpec{title: "KV cache usage (mean over ready pods)", xmax: xmax, width: 1000, height: 220, ymax: 1, legend: true}, kv),
		svgChart(chartSpec{title: "TTFT p99 of requests finishing in each scrape interval (seconds, log scale; dashed: SLO)", xmax: xmax, width: 1000, height: 260,
			logY: true, hline: rep.SLO.TTFT, legend: true}, ttft),
	}
	if hasFrontier(rep) {
		c := frontierChart(rep)
		view.Frontier = &c
		for _, p := range rep.Policies {
			if p.Frontier != nil {
				view.FrontierCosts = append(view.FrontierCosts, fmt.Sprintf("%s %s / %s", frontierSeriesName(p), frontierCost(p.Frontier.CostAt95), frontierCost(p.Frontier.CostAt99)))
			}
		}
		view.FrontierRanking = FrontierRanking(rep)
	}
	// Render whole before writing, so a failure leaves no half page.
	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, view); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

//go:embed report.html.tmpl
var reportTemplateText string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"seconds": seconds,
	"pct":     func(f float64) float64 { return 100 * f },
	"round":   func(d time.Duration) time.Duration { return d.Round(time.Second) },
	"add":     func(a, b float64) float64 { return a + b },
	"neg":     func(a float64) float64 { return -a },
}).Parse(reportTemplateText))

type reportView struct {
	sim.Report
	VariantRows []variantView
	PolicyRows  []rowView
	Load        *chartView
	Replicas    []chartView
	All         []chartView
	// Frontier is the cost-against-attainment chart, with --frontier.
	Frontier        *chartView
	FrontierCosts   []string
	FrontierRanking string
}

type variantView struct {
	sim.VariantBrief
	Color string
}

type rowView struct {
	sim.PolicySummary
	Color string
}

// frontierChart draws each swept policy's runs as one series, cost
// against attainment in %, in knob order (the constant fleets by cost);
// wva's is drawn bold. The x axis starts low enough for every point and
// at most at 90%, so the 95% and 99% marks always show.
func frontierChart(rep sim.Report) chartView {
	var ss []chartSeries
	xmin := 90.0
	for _, p := range rep.Policies {
		f := p.Frontier
		if f == nil {
			continue
		}
		s := chartSeries{name: frontierSeriesName(p), color: policyColor(p.Policy), bold: p.Policy == policies.PolicyWVA}
		if f.Knob == sim.StaticKnob {
			s.color, s.dashed = policyColor(policies.PolicyStaticPeak), true
		}
		for _, pt := range f.Points {
			s.x, s.y = append(s.x, 100*pt.Attainment), append(s.y, pt.Cost)
			knob := fmt.Sprintf("%s=%g", f.Knob, pt.Knob)
			if f.Knob == sim.StaticKnob {
				knob = fmt.Sprintf("%.1f replicas", pt.Knob)
			}
			s.dots = append(s.dots, fmt.Sprintf("%s, %s: cost %.1f, attainment %.2f%%", s.name, knob, pt.Cost, 100*pt.Attainment))
			xmin = math.Min(xmin, 100*pt.Attainment)
		}
		ss = append(ss, s)
	}
	xmin = math.Max(0, math.Floor(xmin/10)*10)
	return svgChart(chartSpec{title: "Cost against SLO attainment, each policy's knob swept (bold: wva; dashed lines: 95% and 99%)", xmin: xmin, xmax: 100,
		width: 1000, height: 320, vlines: []float64{100 * sim.FrontierLow, 100 * sim.FrontierHigh}, legend: true, xlabel: "SLO attainment %", ylabel: "cost"}, ss)
}

type minutePoint struct{ minute, rate float64 }

func minuteBuckets(tl []fleet.TimePoint) []minutePoint {
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
	bold   bool     // drawn wider, with larger dots
	dots   []string // when set, a marked point per (x, y), with this tooltip
}

type chartSpec struct {
	title         string
	width, height int
	xmin, xmax    float64
	ymax          float64
	logY          bool
	hline         float64
	vlines        []float64 // dashed vertical marks, labelled as percentages
	legend        bool
	xlabel        string // "minutes" when empty
	ylabel        string
}

// chartView is one SVG chart's geometry, in pixels; the template draws it.
type chartView struct {
	Title          string
	Width, Height  int
	Left, Top      float64 // plot area's edges
	Right, Bottom  float64
	YTicks, XTicks []tickView
	Areas          []seriesView // stacked, drawn first
	Lines          []seriesView
	HLine          bool // the SLO line, at HLineY
	HLineY         float64
	VLines         []tickView
	XLabel, YLabel string
	Legend         []legendView
}

type tickView struct {
	At    float64
	Label string
}

// seriesView is a polygon's points or a path's d, built from numbers only.
type seriesView struct {
	Name   string
	Shape  string
	Color  string
	Dashed bool
	Width  float64
	Dots   []dotView
}

// dotView is one marked point of a series, with its tooltip.
type dotView struct {
	X, Y, R float64
	Title   string
}

type legendView struct {
	X, Y  float64
	Color string
	Name  string
}

// svgChart lays out x (minutes) against y; stacked series become areas on
// top of each other.
func svgChart(spec chartSpec, ss []chartSeries) chartView {
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
	xmin := spec.xmin
	xmax := math.Max(spec.xmax, xmin+1e-9)
	X := func(x float64) float64 { return left + (x-xmin)/(xmax-xmin)*pw }
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
	c := chartView{Title: spec.title, Width: spec.width, Height: spec.height, Left: left, Top: top, Right: left + pw, Bottom: top + ph,
		XLabel: spec.xlabel, YLabel: spec.ylabel}
	if c.XLabel == "" {
		c.XLabel = "minutes"
	}
	// Grid and axes.
	if spec.logY {
		for v := ymin; v <= ymax*1.0001; v *= 10 {
			c.YTicks = append(c.YTicks, tickView{Y(v), trimFloat(v)})
		}
	} else {
		step := niceStep(ymax / 4)
		for v := 0.0; v <= ymax+1e-9; v += step {
			c.YTicks = append(c.YTicks, tickView{Y(v), trimFloat(v)})
		}
	}
	xstep := niceStep((xmax - xmin) / 8)
	for v := xmin; v <= xmax+1e-9; v += xstep {
		c.XTicks = append(c.XTicks, tickView{X(v), trimFloat(v)})
	}
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
		c.Areas = append(c.Areas, seriesView{Shape: strings.Join(pts, " "), Color: s.color})
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
		sv := seriesView{Name: s.name, Shape: d.String(), Color: s.color, Dashed: s.dashed, Width: 1.4}
		r := 2.5
		if s.bold {
			sv.Width, r = 3, 4
		}
		for j, title := range s.dots {
			sv.Dots = append(sv.Dots, dotView{X: X(s.x[j]), Y: Y(s.y[j]), R: r, Title: title})
		}
		c.Lines = append(c.Lines, sv)
	}
	for _, v := range spec.vlines {
		c.VLines = append(c.VLines, tickView{X(v), trimFloat(v) + "%"})
	}
	if spec.hline > 0 {
		c.HLine, c.HLineY = true, Y(spec.hline)
	}
	if spec.legend {
		x := float64(left)
		for _, s := range ss {
			c.Legend = append(c.Legend, legendView{X: x, Y: float64(spec.height), Color: s.color, Name: s.name})
			x += 24 + 7*float64(len(s.name))
		}
	}
	return c
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
