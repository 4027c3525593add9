//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

// Fault scenarios at production intervals, in TestRealIntervals' cluster:
// namespace faultNS, managed by its own `wva controller`.
const faultNS = "rt-fault"

const (
	surgeModel = "rt/surge"
	cfgModel   = "rt/cfg"
	// cfgKey is the rt/cfg entry of wva-saturation-scaling-config.
	cfgKey = "cfg"
)

func faultVariants() []fleet.Variant {
	return []fleet.Variant{variant(faultNS, "surge", surgeModel), variant(faultNS, "cfg", cfgModel)}
}

// faultScaleToZeroEntries keep the fault groups out of scale to zero (on
// by default in TestRealIntervals): their loads are what is decided on.
func faultScaleToZeroEntries() map[string]string {
	off := func(model string) string {
		return "model_id: " + model + "\nenable_scale_to_zero: false\nretention_period: 10m"
	}
	return map[string]string{"surge": off(surgeModel), cfgKey: off(cfgModel)}
}

// steadyDecision waits for a decision made with metrics from every Ready
// pod of the group and fails unless it is want; it returns that status.
func steadyDecision(ctx context.Context, t *testing.T, r *rig, ns, name, model string, want int32) *llmdv1alpha1.VariantAutoscaling {
	t.Helper()
	reporting := r.waitPrometheus(ctx, t, fmt.Sprintf(`count(vllm:kv_cache_usage_perc{namespace=%q,model_name=%q})`, ns, model), float64(want))
	var va *llmdv1alpha1.VariantAutoscaling
	testenv.Eventually(ctx, t, fmt.Sprintf("%s/%s: a decision with metrics after %s", ns, name, reporting.Format(time.TimeOnly)), func() (bool, string) {
		va = r.va(ctx, t, ns, name)
		a := va.Status.DesiredOptimizedAlloc
		return a.LastRunTime.After(reporting) &&
			meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable), fmt.Sprint(a)
	})
	if a := va.Status.DesiredOptimizedAlloc; a.NumReplicas != want {
		t.Fatalf("%s/%s: decision %d (%s), want %d", ns, name, a.NumReplicas, a.Reason, want)
	}
	return va
}

// eachDecision polls every second until n decisions written after since
// have been seen: poll runs on every tick, decided on every new decision.
func eachDecision(ctx context.Context, t *testing.T, r *rig, ns, name string, since time.Time, n int,
	poll func(), decided func(*llmdv1alpha1.VariantAutoscaling)) {
	t.Helper()
	last := since
	for seen := 0; seen < n; time.Sleep(time.Second) {
		if ctx.Err() != nil {
			t.Fatalf("%s/%s: %d of %d decisions seen after %s: %v", ns, name, seen, n, since.Format(time.TimeOnly), ctx.Err())
		}
		poll()
		va := r.va(ctx, t, ns, name)
		if at := va.Status.DesiredOptimizedAlloc.LastRunTime.Time; at.After(last) {
			last = at
			seen++
			decided(va)
		}
	}
}

// served is wva_desired_replicas for a variant as the HPA reads it, through
// the aggregated external metrics API (-1 on error).
func served(ctx context.Context, r *rig, ns, name string) int64 {
	v, err := testenv.ExternalMetric(ctx, r.kube, ns, name)
	if err != nil {
		return -1
	}
	return v
}

// increasesOnly fails unless every recorded spec.replicas change is a rise.
func increasesOnly(t *testing.T, what string, changes []string) {
	t.Helper()
	for _, c := range changes {
		var from, to int
		if _, err := fmt.Sscanf(c, "%d->%d", &from, &to); err != nil || to < from {
			t.Fatalf("%s: spec.replicas changes %v: a decrease", what, changes)
		}
	}
}

// startFaultGroups creates both fault groups under load without waiting:
// their pods load while the other scenarios run. The three parallel
// subtests wait on the cluster, not the CPU: `make e2e` runs them with
// -parallel 4 (the default, GOMAXPROCS, is 2 in CI). rt/cfg's entry is in force
// (kept as last good) before its group exists, so it is decided by it from
// the start.
func startFaultGroups(ctx context.Context, t *testing.T, r *rig) {
	// The group Prometheus will fail under: 2 replicas at 2.5 req/s each
	// (KV 0.5), decided 2.
	r.deploy(ctx, t, faultNS, "surge", surgeModel, "5", 2, 1, 4)
	r.fleet.SetLoad(faultNS, surgeModel, 5)

	setEntry(ctx, t, r, cfgGoodEntry)
	testenv.Eventually(ctx, t, "the rt/cfg entry kept as last good", func() (bool, string) {
		cm, err := r.kube.CoreV1().ConfigMaps(configNS).Get(ctx, config.LastGoodConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cm.Data[config.LastGoodKey(config.SaturationConfigMapName, cfgKey)] == cfgGoodEntry, fmt.Sprint(cm.Data)
	})
	r.deploy(ctx, t, faultNS, "cfg", cfgModel, "5", 2, 1, 3)
	r.fleet.SetLoad(faultNS, cfgModel, 3) // 1.5 req/s per pod: KV 0.3
}

// cfgGoodEntry makes 2 replicas at KV 0.3 necessary (one alone would be
// at 0.6, above 0.5); under the defaults (0.8) one would be released.
const cfgGoodEntry = "model_id: " + cfgModel + "\nkvCacheThreshold: 0.5"

// prometheusDownDuringScaleUp: the load of the surge group rises to KV 0.78
// on 2 replicas (3 are needed) and Prometheus is stopped within seconds,
// before or just after the engine's next cycle sees it; it stays down for
// at least three engine cycles. Meanwhile the Deployment never shrinks and
// the served wva_desired_replicas never falls below its last good value
// (nor cascades above 3); the VA says why. Once Prometheus is back the
// pending scale-up to 3 is carried out.
func prometheusDownDuringScaleUp(ctx context.Context, t *testing.T, r *rig) {
	const ns, name = faultNS, "surge"
	r.waitReady(ctx, t, ns, name, 2)
	// Start right after a cycle (the next is up to one interval away) that
	// decided 2 with both pods' metrics.
	steadyDecision(ctx, t, r, ns, name, surgeModel, 2)
	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 {
		t.Fatalf("surge: %d replicas before the fault, want 2", *d.Spec.Replicas)
	}
	changes := watchReplicas(ctx, t, r, ns, name, d.ResourceVersion, 2)

	r.fleet.SetLoad(ns, surgeModel, 7.8) // 3.9 req/s per pod: KV 0.78
	r.waitPrometheus(ctx, t, fmt.Sprintf(`max(vllm:kv_cache_usage_perc{namespace=%q,model_name=%q})`, ns, surgeModel), 0.78)
	r.prom.Stop()
	stopped := time.Now()
	// The decision of record when Prometheus went: 2 if the engine had not
	// seen the load yet (the usual case), 3 if a cycle caught it.
	lastGood := int64(r.va(ctx, t, ns, name).Status.DesiredOptimizedAlloc.NumReplicas)

	// At least three cycles, and 3 x 30 s, without Prometheus.
	failed := 0
	minServed, maxServed := lastGood, lastGood
	eachDecision(ctx, t, r, ns, name, stopped, 3, func() {
		v := served(ctx, r, ns, name)
		if v < lastGood || v > 3 {
			t.Fatalf("Prometheus down %s: wva_desired_replicas served %d, want the last good %d (or the pending 3), never less, never more than 3",
				time.Since(stopped).Round(time.Second), v, lastGood)
		}
		lastGood = max(lastGood, v) // a cycle in flight at the stop may publish 3
		minServed, maxServed = min(minServed, v), max(maxServed, v)
		increasesOnly(t, "surge while Prometheus is down", changes())
	}, func(va *llmdv1alpha1.VariantAutoscaling) {
		c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != llmdv1alpha1.ReasonPrometheusError {
			t.Fatalf("a decision while Prometheus is down, MetricsAvailable %v; want False/%s", c, llmdv1alpha1.ReasonPrometheusError)
		}
		if got := int64(va.Status.DesiredOptimizedAlloc.NumReplicas); got != lastGood {
			t.Fatalf("a decision while Prometheus is down: %d (%s), want the last good %d held",
				got, va.Status.DesiredOptimizedAlloc.Reason, lastGood)
		}
		failed++
	})
	for time.Since(stopped) < 3*r.opts.EngineInterval {
		if v := served(ctx, r, ns, name); v != lastGood {
			t.Fatalf("Prometheus down: wva_desired_replicas %d, want %d held", v, lastGood)
		}
		time.Sleep(time.Second)
	}
	down := time.Since(stopped)
	replicasDuring := r.specReplicas(ctx, ns, name)

	if err := r.prom.Start(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	scaled := r.waitReplicas(ctx, t, ns, name, 3)
	va := r.va(ctx, t, ns, name)
	if a := va.Status.DesiredOptimizedAlloc; a.NumReplicas != 3 {
		t.Fatalf("surge at 3 replicas but decision %d (%s)", a.NumReplicas, a.Reason)
	}
	// One HPA sync more: nothing beyond the one step.
	time.Sleep(r.opts.HPASyncPeriod)
	if got := changes(); len(got) != 1 || got[0] != "2->3" {
		t.Fatalf("surge: spec.replicas changes %v, want exactly [2->3]", got)
	}
	r.report.add("real intervals (%s): Prometheus down %s (%d engine cycles, MetricsAvailable=False/PrometheusError) during a scale-up; decision held at %d, served %d..%d, Deployment %d (no decrease); back -> Deployment 2->3 %s after the restart",
		ns, down.Round(time.Second), failed, lastGood, minServed, maxServed, replicasDuring, scaled.Sub(back).Round(time.Second))
}

// brokenConfigUnderLoad: rt/cfg, started by startFaultGroups, is decided 2
// under its own entry (the defaults would give 1). The entry is then made
// unparsable for several engine cycles: the decision stays 2 with metrics
// (the last good entry in force), the Deployment does not move, the
// ConfigMap gets a Warning Event, wva_config_entry_invalid is 1 and the VA
// says ConfigValid=False. Fixed, the metric returns to 0.
func brokenConfigUnderLoad(ctx context.Context, t *testing.T, r *rig) {
	const ns, name = faultNS, "cfg"
	r.waitReady(ctx, t, ns, name, 2)
	steadyDecision(ctx, t, r, ns, name, cfgModel, 2)

	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changes := watchReplicas(ctx, t, r, ns, name, d.ResourceVersion, *d.Spec.Replicas)
	broken := time.Now()
	setEntry(ctx, t, r, "model_id: "+cfgModel+"\nkvCacheThreshold: [not a number")

	testenv.Eventually(ctx, t, "a Warning InvalidConfig Event on the ConfigMap", func() (bool, string) {
		evs, err := r.kube.CoreV1().Events(configNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=InvalidConfig,involvedObject.name=" + config.SaturationConfigMapName})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == "Warning" && !e.LastTimestamp.Time.Before(broken.Truncate(time.Second)) && strings.Contains(e.Message, cfgKey) {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(evs.Items), " events")
	})
	invalidSeries := fmt.Sprintf(`wva_config_entry_invalid{configmap=%q,key=%q}`, config.SaturationConfigMapName, cfgKey)
	testenv.Eventually(ctx, t, invalidSeries+" 1", func() (bool, string) {
		v := r.adapterMetric(ctx, invalidSeries)
		return v == "1", v
	})
	// The change triggers a cycle; then two more at the interval, each
	// with metrics and the last good entry's decision.
	// lastRunTime has whole seconds: the triggered cycle, in the second of
	// the edit, counts.
	var last *llmdv1alpha1.VariantAutoscaling
	eachDecision(ctx, t, r, ns, name, broken.Truncate(time.Second).Add(-time.Nanosecond), 3, func() {
		if v := served(ctx, r, ns, name); v != 2 {
			t.Fatalf("broken entry: wva_desired_replicas %d, want 2", v)
		}
	}, func(va *llmdv1alpha1.VariantAutoscaling) {
		a := va.Status.DesiredOptimizedAlloc
		if a.NumReplicas != 2 || !meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable) {
			t.Fatalf("broken entry: decision %d (%s), MetricsAvailable %v; want 2 with metrics (last good entry in force)",
				a.NumReplicas, a.Reason, meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable))
		}
		last = va
	})
	// Checked on the last decision: the first may have been made in the
	// instant before the adapter saw the edit.
	if c := meta.FindStatusCondition(last.Status.Conditions, llmdv1alpha1.ConditionTypeConfigValid); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != llmdv1alpha1.ReasonInvalidConfig {
		t.Fatalf("broken entry: ConfigValid %v, want False/%s", c, llmdv1alpha1.ReasonInvalidConfig)
	}
	if got := changes(); len(got) != 0 {
		t.Fatalf("broken entry: spec.replicas changes %v, want none", got)
	}
	held := time.Since(broken)

	setEntry(ctx, t, r, cfgGoodEntry)
	testenv.Eventually(ctx, t, invalidSeries+" 0", func() (bool, string) {
		v := r.adapterMetric(ctx, invalidSeries)
		return v == "0", v
	})
	testenv.Eventually(ctx, t, "ConfigValid=True once fixed", func() (bool, string) {
		return meta.IsStatusConditionTrue(r.va(ctx, t, ns, name).Status.Conditions, llmdv1alpha1.ConditionTypeConfigValid), ""
	})
	r.report.add("real intervals (%s): broken ConfigMap entry under load for %s (3 decisions): decision 2 kept (the defaults would give 1), Deployment unchanged; Warning Event InvalidConfig, %s 1, ConfigValid=False; 0 and True once fixed",
		ns, held.Round(time.Second), invalidSeries)
}

// setEntry writes the rt/cfg entry of wva-saturation-scaling-config.
func setEntry(ctx context.Context, t *testing.T, r *rig, text string) {
	t.Helper()
	cms := r.kube.CoreV1().ConfigMaps(configNS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, config.SaturationConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[cfgKey] = text
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// adapterMetric is one series' value on the adapter's /metrics ("?" if
// absent).
func (r *rig) adapterMetric(ctx context.Context, series string) string {
	body, err := testenv.Get(ctx, r.adapter.MetricsURL+"/metrics")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "?"
}
