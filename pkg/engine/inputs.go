// Package engine runs the decision loop of the adapter: every interval (and
// on VA or ConfigMap changes) it collects metrics, runs the pipeline for every
// variant group and publishes the decisions of record in VA status.
package engine

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/enforcer"
	"github.com/wva-project/wva/pkg/pipeline"
)

// Target is what the inventory knows about a VA's scale target.
type Target struct {
	// Resolved is false when the target does not exist or is unsupported;
	// Reason (a TargetResolved condition reason) and Message say why.
	Resolved bool
	Reason   string
	Message  string
	// SpecReplicas is the target's desired replica count (spec.replicas).
	SpecReplicas int32
	// ReadyPods are the names of Ready, non-terminating pods (for LWS: the
	// group leaders).
	ReadyPods []string
	// ReadyAt is when each Ready pod turned Ready (its Ready condition's
	// lastTransitionTime), by name; a pod missing has no known time.
	ReadyAt map[string]time.Time
	// PendingPods counts non-terminating pods that are not Ready yet.
	PendingPods int32
	// MaxNumSeqs and MaxNumBatchedTokens are the vLLM engine args in the
	// target's pod template (--max-num-seqs, --max-num-batched-tokens); 0
	// when not set there.
	MaxNumSeqs          int64
	MaxNumBatchedTokens int64
	// StartupAllowance is how long the pod template's startupProbe lets a
	// container start (initialDelaySeconds + failureThreshold x
	// periodSeconds, the longest container); 0 without a startupProbe.
	StartupAllowance time.Duration
	// StartupDelay is the measured median time from creation to Ready of
	// the target's Ready pods; 0 when none gives a measurement.
	StartupDelay time.Duration
	// PodSelector selects every pod of the target (for an LWS, workers
	// too: they hold GPUs) and NodeSelector is its pod template's; the GPU
	// budget uses them to see what the variant holds and on which pool.
	PodSelector  labels.Selector
	NodeSelector map[string]string
	// Role is the variant's part in prefill/decode disaggregated serving,
	// from the pod template's llm-d.ai/role label.
	Role decision.Role
}

// View is one VA with its target.
type View struct {
	VA     *llmdv1alpha1.VariantAutoscaling
	Target Target
}

// GroupKey identifies a variant group.
type GroupKey struct {
	Namespace string
	ModelID   string
}

// Plan is one group ready for the pipeline, with the VAs in the same order as
// Input.Group.Variants.
type Plan struct {
	Key   GroupKey
	Input pipeline.GroupInput
	VAs   []*llmdv1alpha1.VariantAutoscaling
	// ReadyPods counts the group's Ready pods, for the conditions.
	ReadyPods int32
}

// ConfigResolver resolves the configuration in force for a group.
type ConfigResolver func(modelID, namespace string) params.Resolved

// BuildPlans groups resolved VAs by namespace and modelID and joins them with
// the cycle's metrics. It is pure: everything it needs is passed in. A
// non-nil metricsErr marks every group's metrics unreachable.
func BuildPlans(views []View, metrics collector.Result, metricsErr error, resolve ConfigResolver) []Plan {
	byKey := map[GroupKey][]View{}
	for _, v := range views {
		if !v.Target.Resolved {
			continue
		}
		k := GroupKey{Namespace: v.VA.Namespace, ModelID: v.VA.Spec.ModelID}
		byKey[k] = append(byKey[k], v)
	}
	keys := make([]GroupKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sortGroupKeys(keys)

	plans := make([]Plan, 0, len(keys))
	for _, k := range keys {
		members := byKey[k]
		sort.Slice(members, func(i, j int) bool { return members[i].VA.Name < members[j].VA.Name })
		cfg := resolve(k.ModelID, k.Namespace)
		p := Plan{Key: k, Input: pipeline.GroupInput{
			Group:  decision.Group{ModelID: k.ModelID, Namespace: k.Namespace},
			Config: cfg,
		}}
		var current, reporting, ready int32
		for _, m := range members {
			ready += int32(len(m.Target.ReadyPods))
			p.VAs = append(p.VAs, m.VA)
			p.Input.Group.Variants = append(p.Input.Group.Variants, variantOf(m))
			current += m.Target.SpecReplicas
			for _, pod := range m.Target.ReadyPods {
				pm, ok := metrics.Pods[collector.PodKey{Namespace: k.Namespace, Pod: pod}]
				if !ok || !pm.Reporting() {
					continue
				}
				reporting++
				p.Input.Group.Replicas = append(p.Input.Group.Replicas, decision.ReplicaMetrics{
					Pod: pod, Variant: m.VA.Name, KvCacheUsage: pm.KvCacheUsage, QueueLength: pm.QueueLength, ReadyAt: m.Target.ReadyAt[pod],
					NumGPUBlocks: pm.NumGPUBlocks, BlockSize: pm.BlockSize,
					AvgInputTokens: pm.AvgInputTokens, AvgOutputTokens: pm.AvgOutputTokens, PrefixCacheHitRate: pm.PrefixCacheHitRate,
					ArrivalRate: pm.ArrivalRate, AvgTTFTms: pm.AvgTTFTms, AvgITLms: pm.AvgITLms,
				})
			}
			if t := metricsLostAt(m.VA); t.After(p.Input.MetricsLastSeen) {
				p.Input.MetricsLastSeen = t
			}
		}
		switch {
		case metricsErr != nil:
			p.Input.Metrics = enforcer.MetricsUnreachable
		case reporting > 0 || current == 0:
			// A group at zero replicas has nothing to report; Prometheus
			// answered, so the request count (idle or not) is known.
			p.Input.Metrics = enforcer.MetricsAvailable
		case ready > 0:
			// Ready pods serve but none is scraped: a scraping fault, held.
			p.Input.Metrics = enforcer.MetricsMissing
		default:
			p.Input.Metrics = enforcer.MetricsAbsent
		}
		if metricsErr == nil {
			q := metrics.SchedulerQueueFor(k.Namespace, k.ModelID)
			p.Input.Group.SchedulerQueueSize, p.Input.Group.SchedulerQueueBytes = q.Size, q.Bytes
			p.Input.Group.GatewayArrivalRate, p.Input.Group.GatewayArrivalsReported = metrics.GatewayArrivalsFor(k.Namespace, k.ModelID)
			window := cfg.ScaleToZero.RetentionPeriod.D()
			n, ok := metrics.RequestsOver(window, collector.ModelKey{Namespace: k.Namespace, Model: k.ModelID})
			// No series and no Ready pod: nothing ran to count requests.
			// No series with Ready pods is a scraping fault: left unknown.
			if ok || ready == 0 {
				p.Input.RequestsInRetention = &n
			}
		}
		p.ReadyPods = ready
		plans = append(plans, p)
	}
	return plans
}

// variantCost is spec.variantCost, or the CRD default for a value the
// schema would have rejected.
func variantCost(va *llmdv1alpha1.VariantAutoscaling) float64 {
	cost, err := va.CostValue()
	if err != nil {
		cost, _ = llmdv1alpha1.ParseVariantCost(llmdv1alpha1.DefaultVariantCost)
	}
	return cost
}

func variantOf(v View) decision.Variant {
	va := v.VA
	cost := variantCost(va)
	var gpus int32
	if va.Spec.GPUsPerReplica != nil {
		gpus = *va.Spec.GPUsPerReplica
	}
	return decision.Variant{
		Name:                va.Name,
		Accelerator:         va.Spec.AcceleratorName,
		Cost:                cost,
		MinReplicas:         va.MinReplicasOrDefault(),
		MaxReplicas:         va.MaxReplicasOrDefault(),
		CurrentReplicas:     v.Target.SpecReplicas,
		PendingReplicas:     v.Target.PendingPods,
		DesiredReplicas:     va.Status.DesiredOptimizedAlloc.NumReplicas,
		LastUpdate:          va.Status.DesiredOptimizedAlloc.LastUpdate.Time,
		GPUsPerReplica:      gpus,
		MaxNumSeqs:          v.Target.MaxNumSeqs,
		MaxNumBatchedTokens: v.Target.MaxNumBatchedTokens,
		ScaledFromZeroAt:    scaledFromZeroAt(va),
		StartupAllowance:    v.Target.StartupAllowance,
		StartupDelay:        v.Target.StartupDelay,
		Role:                v.Target.Role,
		LastReadyAt:         lastReadyAt(v.Target),
	}
}

// lastReadyAt is the latest Ready transition among the target's Ready pods.
func lastReadyAt(t Target) time.Time {
	var last time.Time
	for _, pod := range t.ReadyPods {
		if at := t.ReadyAt[pod]; at.After(last) {
			last = at
		}
	}
	return last
}

// scaledFromZeroAt is the fast path's wake time from the VA's annotation;
// zero when absent or unreadable (logged: the wake grace is then lost).
func scaledFromZeroAt(va *llmdv1alpha1.VariantAutoscaling) time.Time {
	s, ok := va.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		klog.ErrorS(err, "ignoring an unreadable annotation", "va", klog.KObj(va), "annotation", llmdv1alpha1.AnnotationScaledFromZeroAt,
			"value", s, "accepted", "an RFC 3339 time")
		return time.Time{}
	}
	return t
}

// metricsLostAt is when the VA's metrics went missing, from the
// MetricsAvailable condition; zero when they are available or unknown. It
// survives adapter restarts and failovers because it lives in VA status.
func metricsLostAt(va *llmdv1alpha1.VariantAutoscaling) time.Time {
	c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeMetricsAvailable)
	if c == nil || c.Status != "False" {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// Windows lists the distinct request-count windows the plans' groups need
// (each retention period rounded up by collector.IdleWindow, so at most
// len(collector.IdleWindows)), so the collector queries each once.
func Windows(views []View, resolve ConfigResolver) []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, v := range views {
		w := collector.IdleWindow(resolve(v.VA.Spec.ModelID, v.VA.Namespace).ScaleToZero.RetentionPeriod.D())
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sortGroupKeys orders group keys by namespace, then model.
func sortGroupKeys(keys []GroupKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].ModelID < keys[j].ModelID
	})
}

// Workloads describes the resolved views to the budget (unresolved ones
// hold nothing it can account).
func Workloads(views []View) []budget.Workload {
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
