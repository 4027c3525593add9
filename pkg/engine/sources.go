package engine

import (
	"fmt"
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
)

// Windows lists the distinct request-count windows the plans' groups need
// (each retention period rounded up by collector.IdleWindow, so at most
// len(collector.IdleWindows)), so the collector queries each once. A group's
// retention (decide.GroupRetention) is its ConfigMap's or one of its
// variants' spec.scaleToZeroRetention, so both are listed for every view.
func Windows(views []decide.View, resolve decide.ConfigResolver) []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	add := func(d time.Duration) {
		if w := collector.IdleWindow(d); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	for _, v := range views {
		add(resolve(v.VA.Spec.ModelID, v.VA.Namespace).ScaleToZero.RetentionPeriod.D())
		if d, ok := v.VA.RetentionOverride(); ok {
			add(d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Workloads describes the resolved views to the budget (unresolved ones
// hold nothing it can account).
func Workloads(views []decide.View) []budget.Workload {
	out := make([]budget.Workload, 0, len(views))
	for _, v := range views {
		if !v.Target.Resolved {
			continue
		}
		out = append(out, budget.Workload{VA: v.VA, Replicas: int64(v.Target.SpecReplicas),
			TemplateNodeSelector: v.Target.NodeSelector, PodSelector: v.Target.PodSelector})
	}
	return out
}

// entryProblems describes rejected ConfigMap entries for the ConfigValid
// condition, one line each.
func entryProblems(invalid []*config.EntryError) []string {
	out := make([]string, len(invalid))
	for i, e := range invalid {
		out[i] = fmt.Sprintf("ConfigMap %s key %q: %v", e.ConfigMap, e.Key, e.Err)
	}
	return out
}
