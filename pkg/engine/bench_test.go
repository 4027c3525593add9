package engine

import (
	"context"
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision/params"
)

// fleet builds groups variant groups of two variants with 5 pods each
// (10 pods per group), all reporting metrics.
func fleet(groups int) ([]decide.View, collector.Result) {
	res := collector.Result{Pods: map[collector.PodKey]collector.PodMetrics{},
		Requests: map[time.Duration]map[collector.ModelKey]float64{10 * time.Minute: {}}}
	var views []decide.View
	for g := range groups {
		ns, model := fmt.Sprintf("ns-%d", g%50), fmt.Sprintf("model-%d", g)
		res.Requests[10*time.Minute][collector.ModelKey{Namespace: ns, Model: model}] = 100
		for v, cost := range []string{"5", "15"} {
			name := fmt.Sprintf("%s-v%d", model, v)
			var ready []string
			for p := range 5 {
				pod := fmt.Sprintf("%s-%d", name, p)
				ready = append(ready, pod)
				res.Pods[collector.PodKey{Namespace: ns, Pod: pod}] = collector.PodMetrics{
					KvCacheUsage: 0.3 + 0.1*float64((g+p)%5), QueueLength: float64(p % 3), HasKvCacheUsage: true, HasQueueLength: true}
			}
			views = append(views, decide.View{VA: va(ns, name, model, cost, 1, 10), Target: resolved(5, ready...)})
		}
	}
	return views, res
}

// BenchmarkDecide is the decision CPU of one cycle: grouping, joining pods
// to variants, and the pipeline for every group (no I/O).
func BenchmarkDecide(b *testing.B) {
	for _, groups := range []int{100, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			views, metrics := fleet(groups)
			store := config.NewStore()
			resolve := func(m, ns string) params.Resolved { return store.Resolve(m, ns) }
			p := decide.Default()
			b.ReportAllocs()
			for b.Loop() {
				plans := decide.BuildPlans(views, metrics, nil, resolve)
				inputs := make([]decide.GroupInput, len(plans))
				for i := range plans {
					inputs[i] = plans[i].Input
				}
				_ = p.Run(t0, inputs)
			}
		})
	}
}

// quietLogs keeps per-decision log lines out of the measurement (and the
// output); production logs them at V(0) only when a decision changes.
func quietLogs(b *testing.B) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	b.Cleanup(func() { _ = fs.Set("logtostderr", "true") })
}

type nopWriter struct{}

func (nopWriter) WriteStatus(context.Context, *llmdv1alpha1.VariantAutoscaling, llmdv1alpha1.VariantAutoscalingStatus) error {
	return nil
}

// BenchmarkEngineCycle is a whole RunOnce with in-memory sources and a
// status writer that does nothing: decision CPU plus status computation,
// metrics and logging, without API or Prometheus round trips.
func BenchmarkEngineCycle(b *testing.B) {
	for _, groups := range []int{100, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			views, metrics := fleet(groups)
			quietLogs(b)
			e := &Engine{Views: &fakeViews{views: views}, Metrics: &fakeMetrics{res: metrics}, Status: nopWriter{},
				Config: config.NewStore(), Pipeline: decide.Default(), Observe: NewMetrics(prometheus.NewRegistry()),
				Clock: clocktesting.NewFakeClock(t0), Interval: 30 * time.Second, StatusHeartbeat: 2 * time.Minute}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.RunOnce(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
