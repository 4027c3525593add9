//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/wva-project/wva/pkg/adapter"
	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/planner"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/engine"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

// The leader-failover fault: one group in faultNS decided by the
// slo-planner (stateful: it remembers its plans and what it found), so the
// analyzers' memory crossing the failover shows.
const (
	plannedModel = "rt/planned"
	// plannedKey is its entry of wva-saturation-scaling-config.
	plannedKey = "planned"
	// rigLeaseDuration is the rig adapter's --leader-election-lease-duration
	// (retry period 1 s).
	rigLeaseDuration = 4 * time.Second
)

func failoverVariants() []fleet.Variant {
	return []fleet.Variant{variant(faultNS, "planned", plannedModel)}
}

// failoverScaleToZeroEntries keep the planned group out of scale to zero.
func failoverScaleToZeroEntries() map[string]string {
	return map[string]string{plannedKey: "model_id: " + plannedModel + "\nenable_scale_to_zero: false\nretention_period: 10m"}
}

// startPlannedGroup selects the slo-planner for rt/planned and starts the
// group under load without waiting: it decides, and learns, while the
// other scenarios run. At 1 req/s the planner's prior plans 3 replicas
// (see sloPlanner).
func startPlannedGroup(ctx context.Context, t *testing.T, r *rig) {
	cms := r.kube.CoreV1().ConfigMaps(configNS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, config.SaturationConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[plannedKey] = "model_id: " + plannedModel + "\nanalyzerName: slo-planner\nstartupDelay: " + prodPodReadyDelay.String()
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.deploy(ctx, t, faultNS, "planned", plannedModel, "5", 3, 1, 6)
	r.fleet.SetLoad(faultNS, plannedModel, 1)
}

// plannerState is the planned group's entry of the analyzers' persisted
// state.
func plannerState(ctx context.Context, t *testing.T, r *rig) planner.State {
	t.Helper()
	cm, err := r.kube.CoreV1().ConfigMaps(configNS).Get(ctx, adapter.AnalyzerStateConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := analyzer.DecodeState[planner.State](engine.DecodeState(cm.Data)[decide.GroupKey{Namespace: faultNS, ModelID: plannedModel}])
	if !ok || st.Analyzer != planner.Name || len(st.Plans) == 0 {
		t.Fatalf("%s: no slo-planner state for %s/%s: %v", adapter.AnalyzerStateConfigMapName, faultNS, plannedModel, cm.Data)
	}
	return st
}

// leaderKilledMidCycle: a second adapter (the standby) joins the rig's
// one; the leader, the Lease holder before the standby existed, is
// SIGKILLed the moment its cycle writes a VA status, with the cycle's
// other status writes outstanding. The standby must hold the Lease and
// decide within the lease duration and a cycle (it takes the Lease once
// it has seen the record unrenewed for a lease duration, retrying every
// second with jitter, and decides at once); its
// first decision for every VA equals the old leader's last; it starts
// from the state the old leader persisted for the cycle it was killed in
// (the planner's plans and the fleet it found are carried, not restarted);
// served wva_desired_replicas never falls (the APIService is moved to the
// standby at once: a short window of errors while kube-apiserver's
// aggregator switches backends is allowed and measured), and no
// Deployment is scaled down.
func leaderKilledMidCycle(ctx context.Context, t *testing.T, r *rig) {
	const plannedName = "planned"
	// The planner's group is deciding, and the whole fleet is steady:
	// every VA's decision carried out (spec and Ready pods equal it) and
	// unchanged for two cycles. A fleet still moving (the previous
	// scenario's scale-up loading) may change a decision in the very cycle
	// the leader dies, and then the statuses it left are not what either
	// leader decides.
	testenv.Eventually(ctx, t, "the planned group on the slo-planner", func() (bool, string) {
		va := r.va(ctx, t, faultNS, plannedName)
		a := va.Status.DesiredOptimizedAlloc
		return meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable) &&
			strings.Contains(a.Reason, "slo-planner"), fmt.Sprint(a)
	})
	testenv.Eventually(ctx, t, "every VA steady", func() (bool, string) { return fleetSteady(ctx, r) })
	holder := func() string {
		l, err := r.kube.CoordinationV1().Leases(configNS).Get(ctx, "wva-adapter", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// The rig's adapter has been alone: the holder is it.
	oldID := holder()
	if oldID == "" {
		t.Fatal("no holder of Lease wva-adapter")
	}
	standbyPort := testenv.FreePort(t)
	standby := r.startAdapter(ctx, standbyPort)
	if h := holder(); h != oldID {
		t.Fatalf("Lease holder %q after the standby started, want the rig's adapter %q", h, oldID)
	}

	vas, err := r.wva.LlmdV1alpha1().VariantAutoscalings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRun := map[string]time.Time{}
	for _, va := range vas.Items {
		lastRun[va.Namespace+"/"+va.Name] = va.Status.DesiredOptimizedAlloc.LastRunTime.Time
	}
	deps, err := r.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decreases := watchDecreases(ctx, t, r, deps)

	// Kill at the first status write of a cycle.
	w, err := r.wva.LlmdV1alpha1().VariantAutoscalings("").Watch(ctx, metav1.ListOptions{ResourceVersion: vas.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var cycleAt time.Time
	for cycleAt.IsZero() {
		select {
		case ev, ok := <-w.ResultChan():
			va, isVA := ev.Object.(*llmdv1alpha1.VariantAutoscaling)
			if !ok {
				t.Fatal("the VA watch ended before a status write")
			}
			if !isVA || ev.Type != watch.Modified {
				continue
			}
			if at := va.Status.DesiredOptimizedAlloc.LastRunTime.Time; at.After(lastRun[va.Namespace+"/"+va.Name]) {
				cycleAt = at
			}
		case <-time.After(2 * r.opts.EngineInterval):
			t.Fatalf("no VA status write in %s", 2*r.opts.EngineInterval)
		}
	}
	w.Stop()
	r.adapter.Kill()
	killed := time.Now()
	// The APIService goes to the standby at once.
	r.adapter, r.adapterPort, r.svc.Port = standby, standbyPort, standbyPort
	if err := r.cluster.RegisterAPIService(ctx, r.svc); err != nil {
		t.Fatal(err)
	}

	// The old leader's last decisions, as served, and its persisted state.
	vas, err = r.wva.LlmdV1alpha1().VariantAutoscalings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int32{}
	written := 0
	for _, va := range vas.Items {
		a := va.Status.DesiredOptimizedAlloc
		last[va.Namespace+"/"+va.Name] = a.NumReplicas
		if a.LastRunTime.Time.Equal(cycleAt) {
			written++
		}
	}
	oldState := plannerState(ctx, t, r)
	// Saved before the cycle's statuses: the state of the decisions
	// being published when the leader died (lastRunTime has whole seconds).
	if newest := oldState.Plans[len(oldState.Plans)-1].At; !newest.Truncate(time.Second).Equal(cycleAt) {
		t.Fatalf("persisted planner state is from the cycle of %s, want the killed leader's last cycle (%s)",
			newest.Format(time.RFC3339Nano), cycleAt.Format(time.RFC3339))
	}

	var leads, decided time.Time
	var first map[string]int32
	var newState planner.State
	unserved, unservedUntil := 0, time.Duration(0)
	var end time.Time
	for ; end.IsZero() || time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		since := time.Since(killed)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		if leads.IsZero() {
			if h := holder(); h != "" && h != oldID {
				leads = time.Now()
			} else if since > rigLeaseDuration+r.opts.EngineInterval {
				t.Fatalf("Lease holder %q %s after the leader's SIGKILL; want the standby within the lease duration %s and a cycle",
					h, since.Round(100*time.Millisecond), rigLeaseDuration)
			}
		}
		if first == nil {
			if n, got := firstDecisions(ctx, standby); n > 0 {
				if n != len(last) {
					t.Fatalf("the new leader had made %d variant decisions when first seen, want one cycle's %d", n, len(last))
				}
				first, decided = got, time.Now()
				end = decided.Add(r.opts.HPASyncPeriod) // one HPA sync on the new leader's decisions
				newState = plannerState(ctx, t, r)
			} else if since > rigLeaseDuration+r.opts.EngineInterval {
				t.Fatalf("no decision by the new leader %s after the SIGKILL", since.Round(time.Second))
			}
		}
		for key, want := range last {
			ns, name, _ := strings.Cut(key, "/")
			switch v := served(ctx, r, ns, name); {
			case v < 0 && since < 15*time.Second:
				unserved++
				unservedUntil = since
			case v < int64(want):
				t.Fatalf("%s %s after the SIGKILL: wva_desired_replicas %d, want the old leader's %d, never less", key, since.Round(100*time.Millisecond), v, want)
			}
		}
		if d := decreases(); len(d) > 0 {
			t.Fatalf("a Deployment scaled down across the failover: %v", d)
		}
	}
	for key, want := range last {
		if got, ok := first[key]; !ok || got != want {
			t.Fatalf("%s: the new leader's first decision %d (present %v), want the old leader's last %d (all: %v vs %v)", key, got, ok, want, first, last)
		}
	}
	// The new leader continued the old one's memory: a cold start would
	// have found the fleet anew and had no plans before its first cycle.
	if !newState.FoundAt.Equal(oldState.FoundAt) {
		t.Fatalf("planner state after the failover found the fleet at %s, want the old leader's %s (carried, not restarted)",
			newState.FoundAt.Format(time.RFC3339), oldState.FoundAt.Format(time.RFC3339))
	}
	if n := len(newState.Plans); n < 2 || !newState.Plans[n-1].At.After(killed) || !newState.Plans[n-2].At.Equal(oldState.Plans[len(oldState.Plans)-1].At) {
		t.Fatalf("planner plans after the failover %v: want the new leader's first plan after the old leader's last (%s)",
			newState.Plans, oldState.Plans[len(oldState.Plans)-1].At.Format(time.RFC3339Nano))
	}
	r.report.add("real intervals (leader failover): leader SIGKILLed at a status write (%d of %d VA statuses of its cycle written); standby held the Lease %s after (lease %s), first decisions %s after, equal to the old leader's for all %d VAs; slo-planner state carried (%d plans, fleet found at %s); served never below the old decisions (%d errors in the first %s while the APIService moved); no Deployment scaled down",
		written, len(last), leads.Sub(killed).Round(100*time.Millisecond), rigLeaseDuration, decided.Sub(killed).Round(100*time.Millisecond), len(last),
		len(newState.Plans), newState.FoundAt.Format(time.TimeOnly), unserved, unservedUntil.Round(100*time.Millisecond))
}

// fleetSteady: every VA decided, its Deployment's spec and Ready pods at
// the decision, and the decision unchanged (lastUpdate) for two cycles.
func fleetSteady(ctx context.Context, r *rig) (bool, string) {
	vas, err := r.wva.LlmdV1alpha1().VariantAutoscalings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, va := range vas.Items {
		a := va.Status.DesiredOptimizedAlloc
		spec, ready := r.specReplicas(ctx, va.Namespace, va.Name), r.readyPods(ctx, va.Namespace, va.Name)
		if a.LastRunTime.IsZero() || a.NumReplicas != spec || int(spec) != ready || time.Since(a.LastUpdate.Time) < 2*r.opts.EngineInterval {
			return false, fmt.Sprintf("%s/%s: decided %d (since %s), spec %d, Ready %d: %s", va.Namespace, va.Name,
				a.NumReplicas, a.LastUpdate.Format(time.TimeOnly), spec, ready, a.Reason)
		}
	}
	return true, ""
}

var desiredSeries = regexp.MustCompile(`^` + llmdv1alpha1.MetricDesiredReplicas + `\{.*namespace="([^"]*)".*variant_name="([^"]*)".*\} (\S+)$`)

// firstDecisions reads an adapter's own decisions from its /metrics: the
// number of variant decisions it has made (wva_decisions_total) and its
// wva_desired_replicas per namespace/name. A follower has made none.
func firstDecisions(ctx context.Context, p *testenv.Process) (int, map[string]int32) {
	body, err := testenv.Get(ctx, p.MetricsURL+"/metrics")
	if err != nil {
		return 0, nil
	}
	n := 0
	desired := map[string]int32{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "wva_decisions_total{"); ok {
			if v, err := strconv.ParseFloat(rest[strings.LastIndex(rest, " ")+1:], 64); err == nil {
				n += int(v)
			}
		}
		if m := desiredSeries.FindStringSubmatch(line); m != nil {
			if v, err := strconv.ParseFloat(m[3], 64); err == nil {
				desired[m[1]+"/"+m[2]] = int32(v)
			}
		}
	}
	return n, desired
}

// watchDecreases records every spec.replicas decrease of the listed
// Deployments from the list's resourceVersion on.
func watchDecreases(ctx context.Context, t *testing.T, r *rig, deps *appsv1.DeploymentList) func() []string {
	t.Helper()
	replicas := map[string]int32{}
	for _, d := range deps.Items {
		replicas[d.Namespace+"/"+d.Name] = *d.Spec.Replicas
	}
	w, err := r.kube.AppsV1().Deployments("").Watch(ctx, metav1.ListOptions{ResourceVersion: deps.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	found := make(chan string, 100)
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type != watch.Modified || d.Spec.Replicas == nil {
				continue
			}
			key := d.Namespace + "/" + d.Name
			if prev, seen := replicas[key]; seen && *d.Spec.Replicas < prev {
				found <- fmt.Sprintf("%s %d->%d", key, prev, *d.Spec.Replicas)
			}
			replicas[key] = *d.Spec.Replicas
		}
	}()
	return func() []string {
		var out []string
		for {
			select {
			case s := <-found:
				out = append(out, s)
			default:
				return out
			}
		}
	}
}
