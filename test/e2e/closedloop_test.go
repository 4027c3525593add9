//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

const evilModel = `evil"} or vector(1) {x="`

// Every variant's replica holds 10,000 KV tokens, 1,000 per request, 2 s
// per request: KV usage per pod = 0.2 * (requests/s per pod).
func variant(ns, name, model string) fleet.Variant {
	return fleet.Variant{Namespace: ns, Name: name, Model: model, KVCapacityTokens: 10000, MaxNumSeqs: 64, TokensPerRequest: 1000, LatencySeconds: 2}
}

func TestClosedLoop(t *testing.T) {
	// Beside TestRealIntervals, on its own rig: both mostly wait on
	// controllers, start-ups and scrapes.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := startRig(ctx, t, append([]fleet.Variant{
		variant("s1", "l4", "meta/llama-8b"),
		variant("s2", "cheap", "meta/llama-70b"), variant("s2", "dear", "meta/llama-70b"),
		variant("s3", "granite", "ibm/granite"),
		variant("s3", "mistral-cheap", "mistral/7b"), variant("s3", "mistral-dear", "mistral/7b"),
		variant("s5", "evil", evilModel),
		variant("s7", "planned", plannerModel),
		variant("s4", "steady", steadyModel), variant("s4", "contended", contendedModel),
		variant("s6", "observed", observedModel),
	}, mixedVariants()...))
	defer r.report.print(t)
	for _, ns := range []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"} {
		testenv.CreateNamespace(ctx, t, r.kube, ns)
	}
	r.selectPercentage(ctx, t)
	// Scale to zero on for granite only; the shortest retention accepted
	// (1 m) for test speed.
	_, err := r.kube.CoreV1().ConfigMaps(configNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-model-scale-to-zero-config", Labels: map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}},
		Data: map[string]string{
			"default": "enable_scale_to_zero: false\nretention_period: 1m",
			"granite": "model_id: ibm/granite\nenable_scale_to_zero: true",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Each subtest sets up the variants it needs in its own namespace and
	// can run alone (-run 'TestClosedLoop/4_faults'); run together they share
	// the rig, the way variants share a real cluster.
	t.Run("5 bad input", func(t *testing.T) { badInput(ctx, t, r) })
	t.Run("1 scale-up without cascade", func(t *testing.T) { scaleUpNoCascade(ctx, t, r) })
	t.Run("2 cost-aware placement", func(t *testing.T) { costAware(ctx, t, r) })
	t.Run("8 SGLang beside vLLM", func(t *testing.T) { sglangBesideVLLM(ctx, t, r) })
	t.Run("3 scale to zero", func(t *testing.T) { scaleToZero(ctx, t, r) })
	t.Run("7 slo-planner", func(t *testing.T) { sloPlanner(ctx, t, r) })
	t.Run("6 dashboard queries", func(t *testing.T) { checkDashboard(ctx, t, r) })
	t.Run("6 alert expressions", func(t *testing.T) { checkAlerts(ctx, t, r) })
	t.Run("4 faults", func(t *testing.T) { faults(ctx, t, r) })
	// Last, so that it covers every request of the subtests that ran.
	t.Run("6 RBAC", func(t *testing.T) { checkNoForbidden(t, r) })
}

// Models of the variants that subtests set up for themselves.
const (
	steadyModel    = "faults/steady"
	contendedModel = "faults/contended"
	observedModel  = "observed/model"
)

// steadyAtThree brings s4/steady to 3 Ready replicas held by a decision of
// 3 with metrics, as scenario 1 does (2 at KV 0.5, then KV 0.78 -> 3 at
// KV 0.52), and waits until it has been steady for a minute; it deploys
// the variant only the first time.
func (r *rig) steadyAtThree(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := r.wva.LlmdV1alpha1().VariantAutoscalings("s4").Get(ctx, "steady", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		r.deploy(ctx, t, "s4", "steady", steadyModel, "5", 2, 1, 4)
		r.fleet.SetLoad("s4", steadyModel, 5)
		r.waitReady(ctx, t, "s4", "steady", 2)
		r.waitDecision(ctx, t, "s4", "steady", 2)
		r.fleet.SetLoad("s4", steadyModel, 7.8)
	}
	r.waitReady(ctx, t, "s4", "steady", 3)
	r.waitDecision(ctx, t, "s4", "steady", 3)
	// Settled: the KV peak of the ramp to 3 has left the engine's 1-minute
	// window, so a newly started adapter, which does not know that the
	// third replica answered that peak, sees only KV 0.52.
	kvPeak := `max(max_over_time(vllm:kv_cache_usage_perc{namespace="s4",model_name="` + steadyModel + `"}[1m]))`
	testenv.Eventually(ctx, t, kvPeak+" < 0.6", func() (bool, string) {
		s, err := r.prom.Query(ctx, kvPeak)
		if err != nil {
			return false, err.Error()
		}
		return len(s) == 1 && s[0].Value < 0.6, fmt.Sprint(s)
	})
}

// waitDecision waits until a VA's decision is want replicas, made with
// metrics.
func (r *rig) waitDecision(ctx context.Context, t *testing.T, ns, name string, want int32) {
	t.Helper()
	testenv.Eventually(ctx, t, fmt.Sprintf("%s/%s: decision %d with metrics", ns, name, want), func() (bool, string) {
		va := r.va(ctx, t, ns, name)
		return va.Status.DesiredOptimizedAlloc.NumReplicas == want &&
			meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable), va.Status.DesiredOptimizedAlloc.Reason
	})
}

func badInput(ctx context.Context, t *testing.T, r *rig) {
	bad := &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: "s5", Name: "min-above-max"},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: "Deployment", Name: "x"},
			ModelID:        "m", MinReplicas: ptr.To[int32](5), MaxReplicas: 2,
		},
	}
	_, err := r.wva.LlmdV1alpha1().VariantAutoscalings("s5").Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "minReplicas must be less than or equal to maxReplicas") {
		t.Fatalf("min > max: want Invalid from the API server, got %v", err)
	}

	// A broken ConfigMap: Event, and the last good config (the percentage
	// analyzer, which the scenarios after this one need) stays in force.
	cm, err := r.kube.CoreV1().ConfigMaps(configNS).Get(ctx, "wva-saturation-scaling-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["default"] = "kvCacheThreshold: [not a number"
	if _, err = r.kube.CoreV1().ConfigMaps(configNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(ctx, t, "InvalidConfig event", func() (bool, string) {
		evs, err := r.kube.CoreV1().Events(configNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=InvalidConfig"})
		return err == nil && len(evs.Items) > 0, fmt.Sprint(err)
	})

	// A model ID full of PromQL syntax is decided like any other: 1 replica
	// at 0.2*4.5 = 0.9 KV -> saturated -> 2.
	r.deploy(ctx, t, "s5", "evil", evilModel, "5", 1, 1, 3)
	r.fleet.SetLoad("s5", evilModel, 4.5)
	r.waitReady(ctx, t, "s5", "evil", 1)
	r.waitReplicas(ctx, t, "s5", "evil", 2)
	va := r.va(ctx, t, "s5", "evil")
	if !meta.IsStatusConditionTrue(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable) {
		t.Fatalf("evil model: MetricsAvailable not True: %+v", va.Status.Conditions)
	}
	r.fleet.SetLoad("s5", evilModel, 0)
	r.report.add("5 bad input: min>max rejected by the API server; broken ConfigMap -> InvalidConfig event; model ID %q scaled 1 -> 2", evilModel)
}

// scaleUpNoCascade: 2 replicas at KV 0.5 hold; load to KV 0.78 -> one more
// replica on the variant; while it loads (8 s) and after, no further
// scale-up: with 3 replicas KV is 0.52.
func scaleUpNoCascade(ctx context.Context, t *testing.T, r *rig) {
	r.deploy(ctx, t, "s1", "l4", "meta/llama-8b", "5", 2, 1, 4)
	r.fleet.SetLoad("s1", "meta/llama-8b", 5)
	r.waitReady(ctx, t, "s1", "l4", 2)
	r.waitDecision(ctx, t, "s1", "l4", 2)
	r.holdReplicas(ctx, t, "s1", "l4", 2, 5*time.Second)

	r.fleet.SetLoad("s1", "meta/llama-8b", 7.8)
	crossed := r.waitPrometheus(ctx, t, `max(max_over_time(vllm:kv_cache_usage_perc{namespace="s1"}[1m]))`, 0.78)
	scaled := r.waitReplicas(ctx, t, "s1", "l4", 3)
	ready := r.waitReady(ctx, t, "s1", "l4", 3)
	r.holdReplicas(ctx, t, "s1", "l4", 3, 20*time.Second)
	r.report.add("1 scale-up: KV crossing seen in Prometheus -> Deployment 2->3 in %s; -> new pod Ready in %s (model load %s); held at 3 for 20 s after; PromQL queries per cycle: %s",
		scaled.Sub(crossed).Round(100*time.Millisecond), ready.Sub(crossed).Round(100*time.Millisecond), r.opts.PodReadyDelay, r.queriesPerCycle(ctx))
}

// costAware: two variants of one model, costs 5 and 15. Light load: the
// expensive one gives a replica back; heavy load: the cheap one grows.
func costAware(ctx context.Context, t *testing.T, r *rig) {
	r.deploy(ctx, t, "s2", "cheap", "meta/llama-70b", "5", 1, 1, 4)
	r.deploy(ctx, t, "s2", "dear", "meta/llama-70b", "15", 2, 1, 4)
	r.fleet.SetLoad("s2", "meta/llama-70b", 3) // 1 req/s per pod -> KV 0.2
	r.waitReady(ctx, t, "s2", "cheap", 1)
	r.waitReady(ctx, t, "s2", "dear", 2)
	start := time.Now()
	down := r.waitReplicas(ctx, t, "s2", "dear", 1)
	r.holdReplicas(ctx, t, "s2", "cheap", 1, 6*time.Second)
	if got := r.specReplicas(ctx, "s2", "dear"); got != 1 {
		t.Fatalf("dear: %d replicas, want 1 (never below max(1, min))", got)
	}

	r.fleet.SetLoad("s2", "meta/llama-70b", 7.8) // 3.9 per pod -> KV 0.78
	crossed := r.waitPrometheus(ctx, t, `max(max_over_time(vllm:kv_cache_usage_perc{namespace="s2"}[1m]))`, 0.78)
	up := r.waitReplicas(ctx, t, "s2", "cheap", 2)
	if got := r.specReplicas(ctx, "s2", "dear"); got != 1 {
		t.Fatalf("scale-up landed on the expensive variant too: dear=%d", got)
	}
	r.waitReady(ctx, t, "s2", "cheap", 2)
	r.report.add("2 cost-aware: scale-down on dear (cost 15) 2->1 %s after pods Ready; scale-up on cheap (cost 5) 1->2 %s after the KV crossing",
		down.Sub(start).Round(100*time.Millisecond), up.Sub(crossed).Round(100*time.Millisecond))
}

// scaleToZero: granite (scale to zero on) goes to 0 after the retention
// period without requests; mistral (off) keeps one replica, on the cheaper
// variant.
func scaleToZero(ctx context.Context, t *testing.T, r *rig) {
	r.deploy(ctx, t, "s3", "granite", "ibm/granite", "5", 1, 0, 2)
	r.deploy(ctx, t, "s3", "mistral-cheap", "mistral/7b", "5", 1, 0, 2)
	r.deploy(ctx, t, "s3", "mistral-dear", "mistral/7b", "15", 1, 0, 2)
	r.fleet.SetLoad("s3", "ibm/granite", 1)
	r.waitReady(ctx, t, "s3", "granite", 1)
	r.waitPrometheus(ctx, t, `sum(vllm:request_success_total{namespace="s3"})`, 5)
	stopped := time.Now()
	r.fleet.SetLoad("s3", "ibm/granite", 0)
	zero := r.waitReplicas(ctx, t, "s3", "granite", 0)
	r.waitReplicas(ctx, t, "s3", "mistral-dear", 0)
	r.holdReplicas(ctx, t, "s3", "mistral-cheap", 1, 4*time.Second)
	va := r.va(ctx, t, "s3", "granite")
	r.report.add("3 scale to zero: granite 1->0 %s after the last request (retention 1 m): %q; mistral (disabled) kept 1 on the cheaper variant",
		zero.Sub(stopped).Round(100*time.Millisecond), va.Status.DesiredOptimizedAlloc.Reason)

	// Requests come back and queue at the EPP: the fast path wakes the
	// group, and once the pod is Ready the adapter keeps it.
	resumed := time.Now()
	r.fleet.SetLoad("s3", "ibm/granite", 1)
	woken := r.waitReplicas(ctx, t, "s3", "granite", 1)
	ready := r.waitReady(ctx, t, "s3", "granite", 1)
	r.holdReplicas(ctx, t, "s3", "granite", 1, 10*time.Second)
	r.report.add("3 scale from zero: requests queued at the EPP -> Deployment 0->1 in %s (fast path, 100 ms poll); pod Ready after %s; held at 1",
		woken.Sub(resumed).Round(10*time.Millisecond), ready.Sub(resumed).Round(100*time.Millisecond))
}

func faults(ctx context.Context, t *testing.T, r *rig) {
	t.Run("Prometheus stopped: no decrease, no flapping, MetricsAvailable=False, recovery", func(t *testing.T) {
		r.steadyAtThree(ctx, t)
		r.prom.Stop()
		testenv.Eventually(ctx, t, "MetricsAvailable=False", func() (bool, string) {
			c := meta.FindStatusCondition(r.va(ctx, t, "s4", "steady").Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == llmdv1alpha1.ReasonPrometheusError, fmt.Sprint(c)
		})
		// Five engine cycles without Prometheus.
		end := time.Now().Add(10 * time.Second)
		for time.Now().Before(end) {
			hpa, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("s4").Get(ctx, "steady", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.specReplicas(ctx, "s4", "steady"); got != 3 || hpa.Status.DesiredReplicas != 3 {
				t.Fatalf("during the outage: Deployment %d, HPA desired %d; want 3 and 3", got, hpa.Status.DesiredReplicas)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := r.prom.Start(ctx); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		testenv.Eventually(ctx, t, "MetricsAvailable=True", func() (bool, string) {
			return meta.IsStatusConditionTrue(r.va(ctx, t, "s4", "steady").Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable), ""
		})
		r.report.add("4 Prometheus outage 10 s (5 cycles): Deployment and HPA held 3; MetricsAvailable=False during, True %s after restart",
			time.Since(back).Round(100*time.Millisecond))
	})

	t.Run("adapter killed and restarted: same decision served at once", func(t *testing.T) {
		r.steadyAtThree(ctx, t)
		port := r.adapterPort
		r.adapter.Kill()
		started := time.Now()
		r.adapter = r.startAdapter(ctx, port)
		var served time.Time
		testenv.Eventually(ctx, t, "decision served again", func() (bool, string) {
			v, err := testenv.ExternalMetric(ctx, r.kube, "s4", "steady")
			if err == nil && v == 3 {
				served = time.Now()
				return true, ""
			}
			return false, fmt.Sprint(v, err)
		})
		r.holdReplicas(ctx, t, "s4", "steady", 3, 4*time.Second)
		r.report.add("4 adapter SIGKILL + restart: wva_desired_replicas=3 served %s after the new process started (engine interval %s)",
			served.Sub(started).Round(100*time.Millisecond), r.opts.EngineInterval)
	})

	t.Run("leader failover with two adapter replicas", func(t *testing.T) {
		r.steadyAtThree(ctx, t)
		secondPort := testenv.FreePort(t)
		second := r.startAdapter(ctx, secondPort)
		first := r.adapter
		// The Lease names the leader: one of the two running adapters.
		testenv.Eventually(ctx, t, "one of the two adapters leads", func() (bool, string) {
			h := r.leaseHolder(ctx)
			return h == r.leaseIdentity[first] || h == r.leaseIdentity[second], h
		})
		leader, follower := first, second
		if r.leaseHolder(ctx) == r.leaseIdentity[second] {
			leader, follower = second, first
		}
		killed := time.Now()
		leader.Kill()
		testenv.Eventually(ctx, t, "the Lease names the surviving adapter", func() (bool, string) {
			h := r.leaseHolder(ctx)
			return h == r.leaseIdentity[follower], h
		})
		took := time.Since(killed)
		last := r.va(ctx, t, "s4", "steady").Status.DesiredOptimizedAlloc.LastRunTime
		testenv.Eventually(ctx, t, "decisions continue under the new leader", func() (bool, string) {
			return r.va(ctx, t, "s4", "steady").Status.DesiredOptimizedAlloc.LastRunTime.After(last.Time), ""
		})
		r.adapter = follower
		if follower == second {
			// The APIService now has to reach the surviving replica.
			r.adapterPort, r.svc.Port = secondPort, secondPort
			if err := r.cluster.RegisterAPIService(ctx, r.svc); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(ctx, t, "metric served by the surviving replica", func() (bool, string) {
			v, err := testenv.ExternalMetric(ctx, r.kube, "s4", "steady")
			return err == nil && v == 3, fmt.Sprint(v, err)
		})
		r.report.add("4 leader failover: Lease holderIdentity moved to the surviving adapter %s after SIGKILL of the leader (lease 4 s), decisions continue", took.Round(100*time.Millisecond))
	})

	t.Run("conflicts on VA status are retried, nothing lost", func(t *testing.T) {
		// Another writer bumps the VA's resourceVersion every 100 ms while
		// a new decision has to be published.
		r.deploy(ctx, t, "s4", "contended", contendedModel, "5", 2, 1, 4)
		r.fleet.SetLoad("s4", contendedModel, 5)
		r.waitReady(ctx, t, "s4", "contended", 2)
		r.waitDecision(ctx, t, "s4", "contended", 2)
		var bumps atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"test/bump":"%d"}}}`, i)
				if _, err := r.wva.LlmdV1alpha1().VariantAutoscalings("s4").Patch(ctx, "contended", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
					bumps.Add(1)
				}
			}
		}()
		r.fleet.SetLoad("s4", contendedModel, 7.8) // 3.9 per pod -> KV 0.78 -> one more replica
		r.waitReplicas(ctx, t, "s4", "contended", 3)
		close(stop)
		<-done
		va := r.va(ctx, t, "s4", "contended")
		if va.Status.DesiredOptimizedAlloc.NumReplicas != 3 || va.Annotations["test/bump"] == "" {
			t.Fatalf("decision %d, annotation %q", va.Status.DesiredOptimizedAlloc.NumReplicas, va.Annotations["test/bump"])
		}
		r.report.add("4 conflicts: %d concurrent VA updates; decision 2->3 published and carried out; other writers' changes kept", bumps.Load())
	})
}

const plannerModel = "qwen/planner"

// sloPlanner: the slo-planner, selected for one model by a ConfigMap entry,
// reads demand from the gateway's request counter through real PromQL and
// plans its replicas at once, without a cascade. The fleet exports no
// latency histograms, so capacity is the prior from the KV geometry: with
// no token averages reported the request shape is 512 in / 256 out, 75% of
// 10,000 KV tokens holds 11.7 requests of 640 tokens, each lasting
// 256 x 90 ms + 0.2 s = 23.2 s: 0.50 req/s per replica. At 1 req/s of
// arrivals the plan is 1 + 2.326 x sqrt(1/23.2) = 1.48 req/s: 3 replicas.
func sloPlanner(ctx context.Context, t *testing.T, r *rig) {
	entry := "model_id: " + plannerModel + "\nanalyzerName: slo-planner\nstartupDelay: 30s"
	cms := r.kube.CoreV1().ConfigMaps(configNS)
	cm, err := cms.Get(ctx, "wva-saturation-scaling-config", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}},
			Data: map[string]string{"planner": entry}}, metav1.CreateOptions{})
	case err == nil:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["planner"] = entry
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	r.deploy(ctx, t, "s7", "planned", plannerModel, "5", 1, 1, 6)
	r.fleet.SetLoad("s7", plannerModel, 1)
	r.waitReady(ctx, t, "s7", "planned", 1)
	seen := r.waitPrometheus(ctx, t, `sum(rate(inference_objective_request_total{model_name="`+plannerModel+`"}[1m]))`, 0.5)
	scaled := r.waitReplicas(ctx, t, "s7", "planned", 3)
	// Ordered replicas count as supply while they load: no cascade.
	r.waitReady(ctx, t, "s7", "planned", 3)
	r.holdReplicas(ctx, t, "s7", "planned", 3, 10*time.Second)
	va := r.va(ctx, t, "s7", "planned")
	reason := va.Status.DesiredOptimizedAlloc.Reason
	for _, want := range []string{"slo-planner", "gateway arrivals"} {
		if !strings.Contains(reason, want) {
			t.Fatalf("decision reason %q does not name %q", reason, want)
		}
	}
	r.fleet.SetLoad("s7", plannerModel, 0)
	r.report.add("7 slo-planner: gateway arrivals seen in Prometheus -> Deployment 1->3 in %s, held at 3 (no cascade); reason %q",
		scaled.Sub(seen).Round(100*time.Millisecond), reason)
}
