//go:build unix

package decide

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/planner"
	"github.com/wva-project/wva/pkg/analyzer/queueing"
	"github.com/wva-project/wva/pkg/analyzer/saturation"
	"github.com/wva-project/wva/pkg/analyzer/token"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// benchFleet is 1,000 groups of two variants with five replicas each. Every
// replica reports everything any analyzer reads (KV cache, queue, token
// averages, arrival rate and the latencies a queueing model of its variant
// predicts at that rate), so each analyzer does its full work. Rates differ
// per pod and group so no two groups are identical.
func benchFleet(b *testing.B) []decision.Group {
	b.Helper()
	w := queueing.Workload{InputTokens: 1000, OutputTokens: 200}
	srv := queueing.Server{MaxBatch: 256, MaxQueue: queueing.QueuePerBatchSlot * 256}
	shapes := []struct {
		name, acc string
		cost      float64
		params    queueing.Params
	}{
		{"l4", "L4", 5, queueing.Params{Alpha: 12, Beta: 0.06, Gamma: 4e-4}},
		{"h100", "H100", 15, queueing.Params{Alpha: 6, Beta: 0.03, Gamma: 2e-4}},
	}
	models := make([]*queueing.Model, len(shapes))
	for i, s := range shapes {
		m, err := queueing.NewModel(s.params, w, srv)
		if err != nil {
			b.Fatal(err)
		}
		models[i] = m
	}
	groups := make([]decision.Group, 1000)
	for gi := range groups {
		g := decision.Group{ModelID: fmt.Sprintf("model-%d", gi), Namespace: "ns", GatewayArrivalsReported: true}
		for vi, s := range shapes {
			g.Variants = append(g.Variants, decision.Variant{Name: s.name, Accelerator: s.acc, Cost: s.cost,
				MinReplicas: 1, MaxReplicas: 20, CurrentReplicas: 5, MaxNumSeqs: 256, StartupDelay: 2 * time.Minute})
			for p := range 5 {
				rate := (1 + float64(vi)) * (1 + 0.1*float64(p) + 0.01*float64(gi%10))
				pr := models[vi].Predict(rate)
				g.Replicas = append(g.Replicas, decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", s.name, p), Variant: s.name,
					KvCacheUsage: 0.4 + 0.05*float64(p), QueueLength: float64(p % 2), NumGPUBlocks: 2048, BlockSize: 16,
					AvgInputTokens: w.InputTokens, AvgOutputTokens: w.OutputTokens, PrefixCacheHitRate: 0.2,
					ArrivalRate: rate, AvgTTFTms: pr.TTFTms, AvgITLms: pr.ITLms})
				g.GatewayArrivalRate += rate
			}
		}
		groups[gi] = g
	}
	return groups
}

func benchConfig(name string) params.Resolved {
	r := config.NewStore().Resolve("m", "ns")
	r.Scaling.AnalyzerName = name
	if name == queueing.Name {
		qm := params.DefaultQueueingModel()
		r.QueueingModel = &qm
	}
	return r
}

// cycle analyzes every group once, from prev[i] to the returned states.
func cycle(b *testing.B, a analyzer.Analyzer, cfg params.Resolved, groups []decision.Group, prev []any) []any {
	next := make([]any, len(groups))
	for i, g := range groups {
		var res analyzer.Result
		var err error
		if sa, ok := a.(analyzer.Stateful); ok {
			res, err = sa.AnalyzeState(g, cfg, prev[i])
		} else {
			res, err = a.Analyze(g, cfg)
		}
		if err != nil {
			b.Fatal(err)
		}
		next[i] = res.State
	}
	return next
}

// BenchmarkAnalyzers1000Groups is one steady-state engine cycle of each
// analyzer over 1,000 groups x 2 variants x 5 replicas (the scale goal:
// under 100 ms of CPU per cycle for every analyzer). Warm-up cycles,
// 30 s apart, carry each analyzer's state so that the measured cycle starts
// from learned parameters and history (the queueing analyzer's filter
// updates every replica, the planner plans from its fit). cpu-ms/op is the
// process's CPU time per cycle (garbage collection included), which other
// work on a shared machine inflates less than ns/op.
func BenchmarkAnalyzers1000Groups(b *testing.B) {
	const warmup = 8
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{saturation.Name, token.Name, queueing.Name, planner.Name} {
		b.Run(name, func(b *testing.B) {
			a := Default().Analyzers[name]
			cfg := benchConfig(name)
			if cfg.Analyzer() != name {
				b.Fatalf("config selects %s, want %s", cfg.Analyzer(), name)
			}
			groups := benchFleet(b)
			state := make([]any, len(groups))
			at := func(c int) {
				for i := range groups {
					groups[i].Now = t0.Add(time.Duration(c) * 30 * time.Second)
				}
			}
			for c := range warmup {
				at(c)
				state = cycle(b, a, cfg, groups, state)
			}
			at(warmup)
			if sa, ok := a.(queueing.Analyzer); ok {
				// The measured cycle runs the filter on every replica.
				res, _ := sa.AnalyzeState(groups[0], cfg, state[0])
				for _, v := range res.Details.(queueing.Analysis).Variants {
					if len(v.Tuning) != 5 {
						b.Fatalf("variant %s: %d filter updates (%s), want 5", v.Name, len(v.Tuning), v.TuningSkipped)
					}
				}
			}
			cpu0 := cpuTime(b)
			for b.Loop() {
				cycle(b, a, cfg, groups, state)
			}
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()*1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
