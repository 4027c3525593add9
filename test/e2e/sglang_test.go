//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

const mixedModel = "mixed/model"

// mixedVariants are one group: a vLLM variant (10,000 KV tokens a replica)
// and an SGLang variant with a 9,000-token pool, so at any load its pods
// read 10/9 of the vLLM pod's KV usage.
func mixedVariants() []fleet.Variant {
	sgl := variant("s8", "sglang", mixedModel)
	sgl.Engine, sgl.KVCapacityTokens = fleet.EngineSGLang, 9000
	return []fleet.Variant{variant("s8", "vllm", mixedModel), sgl}
}

// sglangBesideVLLM: one SGLang and one vLLM replica serve one model. The
// collector's queries give both pods their own signals (KV usage, KV
// capacity, arrival rate) and both VAs are decided with metrics; when both
// pods saturate (SGLang KV 0.94, vLLM 0.85), wva_desired_replicas of the
// cheaper SGLang variant goes 1 -> 2 and its Deployment follows, the vLLM
// variant holding at 1, and no further replica comes (three pods at KV 0.57
// and 0.63). Without SGLang's series its Ready pod would report nothing
// and the group would hold as in transition.
func sglangBesideVLLM(ctx context.Context, t *testing.T, r *rig) {
	r.deploy(ctx, t, "s8", "vllm", mixedModel, "15", 1, 1, 3)
	r.deploy(ctx, t, "s8", "sglang", mixedModel, "5", 1, 1, 3)
	// 2 req/s over 2 pods, 2 s each: 2 in flight per pod, 2,000 tokens:
	// KV 0.2 on vLLM's 10,000, 0.222 on SGLang's 9,000.
	r.fleet.SetLoad("s8", mixedModel, 2)
	r.waitReady(ctx, t, "s8", "vllm", 1)
	r.waitReady(ctx, t, "s8", "sglang", 1)
	r.waitDecision(ctx, t, "s8", "vllm", 1)
	r.waitDecision(ctx, t, "s8", "sglang", 1)

	client, err := promapi.NewClient(promapi.Config{Address: r.prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	col := collector.Collector{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}
	type want struct {
		kv                float64
		blocks, blockSize int64
	}
	wants := map[string]want{"vllm": {0.2, 625, 16}, "sglang": {2000.0 / 9000, 9000, 1}}
	var res collector.Result
	testenv.Eventually(ctx, t, "per-pod signals of both engines (KV 0.2 and 0.222, capacity, ~1 req/s each)", func() (bool, string) {
		res, err = col.Collect(ctx, collector.Request{Namespaces: []string{"s8"}, Time: time.Now()})
		if err != nil {
			return false, err.Error()
		}
		for app, w := range wants {
			name := r.readyPodName(ctx, "s8", app)
			pm, ok := res.ReplicaMetrics("s8", name)
			if !ok || math.Abs(pm.KvCacheUsage-w.kv) > 0.005 || pm.NumGPUBlocks != w.blocks || pm.BlockSize != w.blockSize ||
				math.Abs(pm.ArrivalRate-1) > 0.5 {
				return false, fmt.Sprintf("%s pod %q: %+v", app, name, pm)
			}
		}
		return true, ""
	})

	// 8.5 req/s: 8.5 in flight per pod: both saturate (threshold 0.8),
	// SGLang at 0.94, vLLM at 0.85.
	r.fleet.SetLoad("s8", mixedModel, 8.5)
	crossed := r.waitPrometheus(ctx, t, `max(max_over_time(sglang:token_usage{namespace="s8"}[1m]))`, 0.94)
	testenv.Eventually(ctx, t, "s8/sglang: wva_desired_replicas 2", func() (bool, string) {
		v := served(ctx, r, "s8", "sglang")
		return v == 2, fmt.Sprint(v)
	})
	decided := time.Now()
	scaled := r.waitReplicas(ctx, t, "s8", "sglang", 2)
	r.waitReady(ctx, t, "s8", "sglang", 2)
	// 3 pods at 2.83 req/s: KV 0.57 and 0.63, nothing saturated, avg
	// spare 0.2 above the 0.1 trigger.
	r.holdReplicas(ctx, t, "s8", "sglang", 2, 10*time.Second)
	if got := r.specReplicas(ctx, "s8", "vllm"); got != 1 {
		t.Fatalf("s8/vllm: spec.replicas %d, want 1 (the replica goes to the cheaper SGLang variant)", got)
	}
	if v := served(ctx, r, "s8", "vllm"); v != 1 {
		t.Fatalf("s8/vllm: wva_desired_replicas %d, want 1", v)
	}
	r.fleet.SetLoad("s8", mixedModel, 0)
	r.report.add("8 SGLang beside vLLM: per-pod signals of both engines from the vLLM-only query set (adapter: %s queries per cycle); SGLang KV 0.94 in Prometheus -> wva_desired_replicas 1->2 in %s, Deployment in %s; vLLM held at 1",
		r.queriesPerCycle(ctx), decided.Sub(crossed).Round(100*time.Millisecond), scaled.Sub(crossed).Round(100*time.Millisecond))
}

// readyPodName is the name of a Ready pod of the app ("" if none).
func (r *rig) readyPodName(ctx context.Context, ns, app string) string {
	pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				return p.Name
			}
		}
	}
	return ""
}
