//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

// Production timings: the adapter's default engine interval, the HPA
// controller's default sync period, and a model load longer than an engine
// interval, so a wake is followed by at least one full cycle (and several
// HPA syncs) with the pod still loading and requests still waiting.
const (
	prodEngineInterval = 30 * time.Second
	prodHPASync        = 15 * time.Second
	prodPodReadyDelay  = 45 * time.Second
)

// TestRealIntervals is scale from zero at production intervals, twice at
// once in one cluster: in rt-hpa the HPA owns 0 <-> 1 (HPAScaleToZero,
// minReplicas 0); in rt-ctl a second `wva controller` is told the HPA
// cannot (--hpa-scale-to-zero=false: minReplicas 1, the controller scales
// to and from 0 itself), as on a cluster without the gate. Alongside, in
// rt-fault: a broken ConfigMap entry under load; in rt-api, VA status
// writes failing (429, 500) with a scale-up pending; then, once nothing
// else needs the rig, the adapter leader killed mid-cycle (a group on the
// stateful slo-planner, rt/planned, learns meanwhile) and Prometheus down
// during a scale-up.
func TestRealIntervals(t *testing.T) {
	t.Parallel() // beside TestClosedLoop, on its own rig
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	modes := []struct {
		name, ns      string
		hpaMinReplica int32
	}{
		{"HPA scale to zero", "rt-hpa", 0},
		{"controller scale to zero", "rt-ctl", 1},
	}
	var variants []fleet.Variant
	for _, m := range modes {
		variants = append(variants, variant(m.ns, "wake", "rt/"+m.ns))
	}
	variants = append(variants, faultVariants()...)
	variants = append(variants, apiVariants()...)
	variants = append(variants, failoverVariants()...)
	r := startRigWith(ctx, t, rigOptions{
		EngineInterval: prodEngineInterval, HPASyncPeriod: prodHPASync, PodReadyDelay: prodPodReadyDelay,
		FeatureGates: map[string]bool{"HPAScaleToZero": true},
		// Capabilities probed (minReplicas 0 accepted); production resync.
		ControllerArgs: []string{"--watch-namespace=rt-hpa", "--resync=30s"},
		APIFaults:      &apiFaultProxy{ns: apiNS},
	}, variants)
	defer r.report.print(t)
	r.startController(ctx, "controller rt-ctl", "--watch-namespace=rt-ctl", "--resync=30s", "--hpa-scale-to-zero=false")
	r.startController(ctx, "controller "+faultNS, "--watch-namespace="+faultNS, "--resync=30s")
	r.startController(ctx, "controller "+apiNS, "--watch-namespace="+apiNS, "--resync=30s")
	r.selectPercentage(ctx, t)
	stz := map[string]string{"default": "enable_scale_to_zero: true\nretention_period: 1m"}
	maps.Copy(stz, faultScaleToZeroEntries())
	maps.Copy(stz, apiScaleToZeroEntries())
	maps.Copy(stz, failoverScaleToZeroEntries())
	_, err := r.kube.CoreV1().ConfigMaps(configNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-model-scale-to-zero-config", Labels: map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}},
		Data:       stz,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CreateNamespace(ctx, t, r.kube, faultNS)
	startFaultGroups(ctx, t, r)
	startPlannedGroup(ctx, t, r)
	testenv.CreateNamespace(ctx, t, r.kube, apiNS)
	r.deploy(ctx, t, apiNS, "api", apiModel, "5", 2, 1, 4)
	r.fleet.SetLoad(apiNS, apiModel, 5) // 2.5 req/s per pod: KV 0.5, decided 2
	// Everything that needs Prometheus runs at once; the outage after.
	t.Run("group", func(t *testing.T) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				wakeAtProductionIntervals(ctx, t, r, m.ns, "rt/"+m.ns, m.hpaMinReplica)
			})
		}
		t.Run("broken ConfigMap entry under load", func(t *testing.T) {
			t.Parallel()
			brokenConfigUnderLoad(ctx, t, r)
		})
		t.Run("API server failing VA status writes", func(t *testing.T) {
			t.Parallel()
			statusWritesFailing(ctx, t, r)
		})
	})
	// Before the outage: Prometheus' restart empties the planner's 1m rate
	// windows for a minute, which would move its decisions whatever the
	// failover does.
	if !t.Failed() {
		t.Run("leader killed mid-cycle", func(t *testing.T) { leaderKilledMidCycle(ctx, t, r) })
	}
	if !t.Failed() {
		t.Run("Prometheus down during a scale-up", func(t *testing.T) { prometheusDownDuringScaleUp(ctx, t, r) })
	}
	r.report.add("real intervals: whole test %s (rig start included)", time.Since(start).Round(time.Second))
}

// wakeAtProductionIntervals: a Deployment at 0 whose VA was decided 0;
// requests arrive and wait at the EPP; the fast path wakes it; the pod
// loads for 45 s. Its spec.replicas, read every second, must never return
// to 0 from the wake until the pod serves and the adapter and the HPA have
// acted on a decision made with its load.
func wakeAtProductionIntervals(ctx context.Context, t *testing.T, r *rig, ns, model string, hpaMin int32) {
	const name = "wake"
	testenv.CreateNamespace(ctx, t, r.kube, ns)
	r.deploy(ctx, t, ns, name, model, "5", 0, 0, 2)

	// Idle at 0: the HPA exists with the expected minimum and has synced,
	// and the decision of record is 0.
	testenv.Eventually(ctx, t, "HPA synced with minReplicas "+fmt.Sprint(hpaMin), func() (bool, string) {
		hpa, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return hpa.Spec.MinReplicas != nil && *hpa.Spec.MinReplicas == hpaMin && len(hpa.Status.Conditions) > 0,
			fmt.Sprint(hpa.Spec.MinReplicas, hpa.Status.Conditions)
	})
	testenv.Eventually(ctx, t, "decision of record 0", func() (bool, string) {
		a := r.va(ctx, t, ns, name).Status.DesiredOptimizedAlloc
		return !a.LastRunTime.IsZero() && a.NumReplicas == 0, fmt.Sprint(a)
	})

	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changes := watchReplicas(ctx, t, r, ns, name, d.ResourceVersion, *d.Spec.Replicas)

	resumed := time.Now()
	r.fleet.SetLoad(ns, model, 1) // KV 0.2 on one replica: one is enough
	woken := r.waitReplicas(ctx, t, ns, name, 1)

	// From the wake on, poll every second; any 0 fails.
	var ready, served, decided, end time.Time
	for ; end.IsZero() || time.Now().Before(end); time.Sleep(time.Second) {
		if got := r.specReplicas(ctx, ns, name); got < 1 {
			t.Fatalf("%s/%s: spec.replicas %d %s after the wake (pod Ready: %v, serving: %v); want >= 1 while requests wait and after",
				ns, name, got, time.Since(woken).Round(time.Second), !ready.IsZero(), !served.IsZero())
		}
		switch {
		case ctx.Err() != nil:
			t.Fatal(ctx.Err())
		case ready.IsZero():
			if r.readyPods(ctx, ns, name) == 1 {
				ready = time.Now()
			}
		case served.IsZero():
			// The fleet serves it: successes reach Prometheus.
			if s, err := r.prom.Query(ctx, `sum(vllm:request_success_total{namespace="`+ns+`"})`); err == nil && len(s) == 1 && s[0].Value >= 5 {
				served = time.Now()
			}
		case decided.IsZero():
			// A cycle that saw the load (lastRunTime has whole seconds),
			// then two HPA syncs acting on it.
			if a := r.va(ctx, t, ns, name).Status.DesiredOptimizedAlloc; !a.LastRunTime.Time.Before(served.Truncate(time.Second)) {
				if a.NumReplicas != 1 {
					t.Fatalf("decision with the pod serving: %d (%s), want 1", a.NumReplicas, a.Reason)
				}
				decided = time.Now()
				end = decided.Add(2 * r.opts.HPASyncPeriod)
			}
		}
	}
	// 1 req/s is KV 0.2 on one replica: nothing but the wake is right.
	// Each further change is a flap (1 -> 0 -> 1) or a cascade (1 -> 2).
	if got := changes(); len(got) != 1 {
		t.Fatalf("%s/%s: spec.replicas changes %v, want exactly the wake [0->1]", ns, name, got)
	}
	r.report.add("real intervals (%s): requests waiting -> 0->1 in %s; pod Ready %s after the wake (load %s); serving %s after; next decision 1 at +%s; held >= 1 (1 s polls) through +%s; 1 replica change",
		ns, woken.Sub(resumed).Round(10*time.Millisecond), ready.Sub(woken).Round(time.Second), r.opts.PodReadyDelay,
		served.Sub(ready).Round(time.Second), decided.Sub(served).Round(time.Second), time.Since(woken).Round(time.Second))
}

// watchReplicas records every spec.replicas change of a Deployment from
// resourceVersion on (a watch sees changes a 1 s poll would miss, e.g.
// 1 -> 0 -> 1 within a second); the returned func lists them.
func watchReplicas(ctx context.Context, t *testing.T, r *rig, ns, name, resourceVersion string, from int32) func() []string {
	t.Helper()
	w, err := r.kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: resourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var changes []string
	closed := false
	last := from
	go func() {
		defer func() { mu.Lock(); closed = true; mu.Unlock() }()
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if ev.Type != watch.Modified || !ok || d.Spec.Replicas == nil || *d.Spec.Replicas == last {
				continue
			}
			mu.Lock()
			changes = append(changes, fmt.Sprintf("%d->%d", last, *d.Spec.Replicas))
			mu.Unlock()
			last = *d.Spec.Replicas
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		if closed && ctx.Err() == nil {
			t.Fatalf("the watch on %s/%s ended early; changes seen: %v", ns, name, changes)
		}
		return append([]string(nil), changes...)
	}
}
