// Command misscurve reads a `wva simulate --timeline` CSV and prints, per
// variant, the share of its requests over each target against the load on
// each of its ready replicas: how steep a variant's misses rise past its
// knee, and where that knee lies, as the gateway actually loaded it.
//
//	wva simulate --policies wva --shape day --duration 24h --timeline day.csv
//	go run ./hack/misscurve -in day.csv
//
// Each scrape's requests sent to a variant's pods over the scrape interval,
// divided by its ready replicas, is the scrape's load per replica; the
// requests the variant finished in the scrape, and those over the ITL and
// the TTFT target, are counted in that load's bin. Requests finish after
// they are sent, so a bin's misses lag its load by a request's duration
// (seconds at most for chat).
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/wva-project/wva/pkg/sim/report"
)

func main() {
	in := flag.String("in", "", "timeline CSV written by wva simulate --timeline")
	policy := flag.String("policy", "wva", "the policy whose rows are read")
	width := flag.Float64("bin", 0.5, "width of a load bin, in requests per second per replica")
	flag.Parse()
	if *in == "" || *width <= 0 {
		fmt.Fprintln(os.Stderr, "misscurve: -in is required and -bin must be positive")
		os.Exit(2)
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "misscurve:", err)
		os.Exit(1)
	}
	defer f.Close()
	curves, err := read(f, *policy, *width)
	if err != nil {
		fmt.Fprintln(os.Stderr, "misscurve:", err)
		os.Exit(1)
	}
	render(os.Stdout, curves, *width)
}

// variantColumns are the per-variant columns read (report.VariantColumn):
// requests sent, ready replicas, finished, over the ITL target, over the
// TTFT target.
var variantColumns = [...]string{report.ColumnDispatched, report.ColumnReady, report.ColumnFinished, report.ColumnMissedITL, report.ColumnMissedTTFT}

// bin is what the scrapes at one load per replica counted.
type bin struct {
	Samples, Finished, OverITL, OverTTFT float64
}

// curve is one variant's bins, by index (load / width).
type curve struct {
	Variant string
	Bins    map[int]*bin
}

// read bins the policy's scrapes per variant.
func read(r io.Reader, policy string, width float64) ([]curve, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("empty timeline")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range []string{"policy", "seconds"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("no %q column: not a wva simulate --timeline CSV", name)
		}
	}
	var variants []string
	for _, name := range rows[0] {
		if v, ok := strings.CutPrefix(name, report.VariantColumn(report.ColumnDispatched, "")); ok {
			variants = append(variants, v)
		}
	}
	curves := make([]curve, len(variants))
	for i, v := range variants {
		for _, c := range variantColumns {
			if _, ok := col[report.VariantColumn(c, v)]; !ok {
				return nil, fmt.Errorf("no %q column beside %s", report.VariantColumn(c, v), report.VariantColumn(report.ColumnDispatched, v))
			}
		}
		curves[i] = curve{Variant: v, Bins: map[int]*bin{}}
	}
	prev := math.NaN()
	found := false
	for n, row := range rows[1:] {
		if row[col["policy"]] != policy {
			continue
		}
		found = true
		num := func(name string) (float64, error) {
			x, err := strconv.ParseFloat(row[col[name]], 64)
			if err != nil {
				return 0, fmt.Errorf("row %d, %s: %w", n+2, name, err)
			}
			return x, nil
		}
		now, err := num("seconds")
		if err != nil {
			return nil, err
		}
		interval := now - prev
		prev = now
		if math.IsNaN(interval) || interval <= 0 {
			// The first scrape has no interval to rate its requests over.
			continue
		}
		for i, v := range variants {
			var x [len(variantColumns)]float64
			for j, name := range variantColumns {
				if x[j], err = num(report.VariantColumn(name, v)); err != nil {
					return nil, err
				}
			}
			if x[1] <= 0 {
				continue
			}
			load := x[0] / interval / x[1]
			b := curves[i].Bins[int(load/width)]
			if b == nil {
				b = &bin{}
				curves[i].Bins[int(load/width)] = b
			}
			b.Samples++
			b.Finished += x[2]
			b.OverITL += x[3]
			b.OverTTFT += x[4]
		}
	}
	if !found {
		return nil, fmt.Errorf("no rows of policy %q", policy)
	}
	return curves, nil
}

// render prints each variant's bins as a table.
func render(w io.Writer, curves []curve, width float64) {
	for _, c := range curves {
		fmt.Fprintf(w, "%s\n\n| load per replica (req/s) | scrapes | finished | over ITL | over TTFT |\n| --- | --- | --- | --- | --- |\n", c.Variant)
		for _, k := range slices.Sorted(maps.Keys(c.Bins)) {
			b := c.Bins[k]
			fmt.Fprintf(w, "| %.2f-%.2f | %.0f | %.0f | %s | %s |\n", float64(k)*width, float64(k+1)*width, b.Samples, b.Finished, share(b.OverITL, b.Finished), share(b.OverTTFT, b.Finished))
		}
		fmt.Fprintln(w)
	}
}

// share is part of whole as a percentage, "-" when nothing finished.
func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*part/whole, 'f', 2, 64) + "%"
}
