package engine

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/deletioncost"
)

// RunningSource reads each pod's running requests (Prometheus).
type RunningSource interface {
	RequestsRunning(ctx context.Context, namespaces []string, at time.Time) (map[collector.PodKey]float64, error)
}

// PodCostWriter sets the pod-deletion-cost annotation of pods in a
// namespace (nil: remove it) and returns how many pods it patched.
type PodCostWriter interface {
	WriteCosts(ctx context.Context, namespace string, costs map[string]*int32) (int, error)
}

// scaleDowns lists the views of Deployments whose decision is below
// spec.replicas and above 0: their ReplicaSet will pick the pods to delete
// once the HPA acts. StatefulSets and LeaderWorkerSets delete the highest
// ordinal or group index whatever the annotation, and at 0 every pod goes,
// so those are left out. results are plans' (c.Results).
func scaleDowns(views []decide.View, plans []decide.Plan, results []decide.GroupResult) []decide.View {
	byName := map[string]decide.View{}
	for _, v := range views {
		byName[v.VA.Namespace+"/"+v.VA.Name] = v
	}
	var out []decide.View
	for i, p := range plans {
		for j, va := range p.VAs {
			v, ok := byName[va.Namespace+"/"+va.Name]
			want := results[i].Targets[j].Replicas
			if !ok || !v.Target.Resolved || va.Spec.ScaleTargetRef.Kind != llmdv1alpha1.ScaleTargetKindDeployment ||
				want <= 0 || want >= v.Target.SpecReplicas {
				continue
			}
			out = append(out, v)
		}
	}
	return out
}

// setDeletionCosts annotates the Ready pods of every Deployment the cycle
// scales down with their running requests, before the decision is
// published: the HPA reads the lower value only after that. It is best
// effort: a failed query or patch is logged and counted, and the decision
// is published anyway (the ReplicaSet then picks as it would without wva).
func (e *Engine) setDeletionCosts(ctx context.Context, c *Cycle, views []decide.View, plans []decide.Plan, now time.Time) {
	if e.DeletionCosts == nil || e.Running == nil || c.MetricsErr != nil {
		return
	}
	down := scaleDowns(views, plans, c.Results)
	if len(down) == 0 {
		return
	}
	running, err := e.Running.RequestsRunning(ctx, namespacesOf(down), now)
	c.Queries++
	if err != nil {
		klog.ErrorS(err, "reading running requests per pod; scale-downs this cycle leave pod-deletion-cost as it is")
		if e.Observe != nil {
			e.Observe.QueryErrors.WithLabelValues(deletioncost.QueryRequestsRunning).Inc()
		}
		return
	}
	for _, v := range down {
		byPod := map[string]float64{}
		for _, pod := range v.Target.ReadyPods {
			if r, ok := running[collector.PodKey{Namespace: v.VA.Namespace, Pod: pod}]; ok {
				byPod[pod] = r
			}
		}
		n, err := e.DeletionCosts.WriteCosts(ctx, v.VA.Namespace, deletioncost.Costs(v.Target.ReadyPods, byPod))
		c.CostPatches += n
		if e.Observe != nil {
			e.Observe.DeletionCostPatches.WithLabelValues("ok").Add(float64(n))
		}
		if err != nil {
			klog.ErrorS(err, "setting pod-deletion-cost before a scale-down", "va", klog.KObj(v.VA))
			if e.Observe != nil {
				e.Observe.DeletionCostPatches.WithLabelValues("error").Inc()
			}
			continue
		}
		if n > 0 {
			klog.V(2).InfoS("pod-deletion-cost set before a scale-down", "va", klog.KObj(v.VA), "patched", n, "running", byPod)
		}
	}
}
