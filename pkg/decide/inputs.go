package decide

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Target and View are the inventory's output (decision.InventoryTarget,
// decision.View), named here for this package's code.
type (
	Target = decision.InventoryTarget
	View   = decision.View
)

// GroupKey identifies a variant group.
type GroupKey struct {
	Namespace string
	ModelID   string
}

// Plan is one group ready for the pipeline, with the VAs in the same order as
// Input.Group.Variants.
type Plan struct {
	Key   GroupKey
	Input GroupInput
	VAs   []*llmdv1alpha1.VariantAutoscaling
	// ReadyPods counts the group's Ready pods, for the conditions.
	ReadyPods int32
}

// Metrics is one collection cycle as BuildPlans reads it (collector.Result
// implements it).
type Metrics interface {
	// ReplicaMetrics is what a pod reported, without its identity (Pod,
	// Variant, ReadyAt), and whether it reports the saturation inputs.
	ReplicaMetrics(namespace, pod string) (decision.ReplicaMetrics, bool)
	// SchedulerQueue is the EPP flow-control queue of a model served in
	// namespace.
	SchedulerQueue(namespace, model string) (size, bytes float64)
	// GatewayArrivalsFor is the gateway's request rate for a model served in
	// namespace, and whether any EPP series reported it.
	GatewayArrivalsFor(namespace, model string) (float64, bool)
	// RequestCount is a model's successful requests over a retention
	// period, and whether the model had a series in it.
	RequestCount(period time.Duration, namespace, model string) (float64, bool)
}

// ConfigResolver resolves the configuration in force for a group.
type ConfigResolver func(modelID, namespace string) params.Resolved

// BuildPlans groups resolved VAs by namespace and modelID and joins them with
// the cycle's metrics. It is pure: everything it needs is passed in. A
// non-nil metricsErr marks every group's metrics unreachable.
func BuildPlans(views []View, metrics Metrics, metricsErr error, resolve ConfigResolver) []Plan {
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
	SortGroupKeys(keys)

	plans := make([]Plan, 0, len(keys))
	for _, k := range keys {
		members := byKey[k]
		sort.Slice(members, func(i, j int) bool { return members[i].VA.Name < members[j].VA.Name })
		cfg := resolve(k.ModelID, k.Namespace)
		cfg.ScaleToZero.RetentionPeriod = GroupRetention(cfg.ScaleToZero.RetentionPeriod, members)
		p := Plan{Key: k, Input: GroupInput{
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
				r, ok := metrics.ReplicaMetrics(k.Namespace, pod)
				if !ok {
					continue
				}
				reporting++
				r.Pod, r.Variant, r.ReadyAt = pod, m.VA.Name, m.Target.ReadyAt[pod]
				p.Input.Group.Replicas = append(p.Input.Group.Replicas, r)
			}
			if t := metricsLostAt(m.VA); t.After(p.Input.MetricsLastSeen) {
				p.Input.MetricsLastSeen = t
			}
		}
		switch {
		case metricsErr != nil:
			p.Input.Metrics = MetricsUnreachable
		case reporting > 0 || current == 0:
			// A group at zero replicas has nothing to report; Prometheus
			// answered, so the request count (idle or not) is known.
			p.Input.Metrics = MetricsAvailable
		case ready > 0:
			// Ready pods serve but none is scraped: a scraping fault, held.
			p.Input.Metrics = MetricsMissing
		default:
			p.Input.Metrics = MetricsAbsent
		}
		if metricsErr == nil {
			p.Input.Group.SchedulerQueueSize, p.Input.Group.SchedulerQueueBytes = metrics.SchedulerQueue(k.Namespace, k.ModelID)
			p.Input.Group.GatewayArrivalRate, p.Input.Group.GatewayArrivalsReported = metrics.GatewayArrivalsFor(k.Namespace, k.ModelID)
			window := cfg.ScaleToZero.RetentionPeriod.D()
			n, ok := metrics.RequestCount(window, k.Namespace, k.ModelID)
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

// GroupRetention is a group's scale-to-zero retention: the longest among
// its variants', each variant's spec.scaleToZeroRetention when set, else
// the ConfigMap's (base). The group goes to zero as one, so no variant
// reaches zero before its own retention has passed without requests.
func GroupRetention(base params.Duration, members []View) params.Duration {
	out, anyBase := params.Duration(0), len(members) == 0
	for _, m := range members {
		d, ok := m.VA.RetentionOverride()
		if !ok {
			anyBase = true
			continue
		}
		out = max(out, params.Duration(d))
	}
	if anyBase {
		out = max(out, base)
	}
	return out
}

// VariantCost is spec.variantCost, or the CRD default for a value the
// schema would have rejected.
func VariantCost(va *llmdv1alpha1.VariantAutoscaling) float64 {
	cost, err := va.CostValue()
	if err != nil {
		cost, _ = llmdv1alpha1.ParseVariantCost(llmdv1alpha1.DefaultVariantCost)
	}
	return cost
}

func variantOf(v View) decision.Variant {
	va := v.VA
	cost := VariantCost(va)
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

// SortGroupKeys orders group keys by namespace, then model.
func SortGroupKeys(keys []GroupKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].ModelID < keys[j].ModelID
	})
}
