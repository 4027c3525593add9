package report

import (
	"encoding/csv"
	"io"
	"strconv"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/oracle"
)

// RenderTimelineCSV writes every policy's timeline (one row per scrape:
// arrivals, replicas and ready replicas per variant, queues, KV, TTFT and
// the requests that finished over each target, then per variant the
// requests sent to its pods, running, finished and over each target) as
// CSV, for reading where a policy missed the SLO, what it ran then and
// which variant missed. The static-frontier rows are left out.
func RenderTimelineCSV(w io.Writer, rep sim.Report) error {
	cw := csv.NewWriter(w)
	head := []string{"policy", "seconds", "arrival_rate"}
	for _, v := range rep.Variants {
		head = append(head, VariantColumn(ColumnReplicas, v.Name))
	}
	for _, v := range rep.Variants {
		head = append(head, VariantColumn(ColumnReady, v.Name))
	}
	head = append(head, "waiting", "running", "kv_usage", "ttft_p50_seconds", "ttft_p99_seconds", "finished", "missed_ttft", "missed_itl")
	for _, v := range rep.Variants {
		for _, c := range variantColumns {
			head = append(head, VariantColumn(c, v.Name))
		}
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, p := range rep.Policies {
		if oracle.IsFrontierRow(p.Policy) {
			continue
		}
		for _, tp := range p.Timeline {
			row := []string{p.Policy, num(tp.Seconds), num(tp.ArrivalRate)}
			for i := range rep.Variants {
				row = append(row, strconv.Itoa(int(at(tp.Replicas, i))))
			}
			for i := range rep.Variants {
				row = append(row, strconv.Itoa(int(at(tp.Ready, i))))
			}
			row = append(row, strconv.Itoa(tp.Waiting), strconv.Itoa(tp.Running), num(tp.KVUsage), num(tp.TTFTp50), num(tp.TTFTp99),
				strconv.Itoa(tp.Finished), strconv.Itoa(tp.MissedTTFT), strconv.Itoa(tp.MissedITL))
			for i := range rep.Variants {
				var vp fleet.VariantPoint
				if i < len(tp.Variants) {
					vp = tp.Variants[i]
				}
				for _, n := range []int{vp.Dispatched, vp.Running, vp.Finished, vp.MissedTTFT, vp.MissedITL} {
					row = append(row, strconv.Itoa(n))
				}
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// The per-variant columns of the timeline CSV, each named by
// VariantColumn: replicas and ready replicas, then the requests sent to
// the variant's pods, running, finished and over each target.
const (
	ColumnReplicas   = "replicas"
	ColumnReady      = "ready"
	ColumnDispatched = "dispatched"
	ColumnRunning    = "running"
	ColumnFinished   = "finished"
	ColumnMissedTTFT = "missed_ttft"
	ColumnMissedITL  = "missed_itl"
)

// VariantColumn names a variant's column of the timeline CSV.
func VariantColumn(column, variant string) string { return column + "_" + variant }

// variantColumns are the columns written from a VariantPoint, in its order.
var variantColumns = []string{ColumnDispatched, ColumnRunning, ColumnFinished, ColumnMissedTTFT, ColumnMissedITL}

func at(xs []int32, i int) int32 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
