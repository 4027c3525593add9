// Package deletioncost steers a Deployment's scale-down to its idle pods.
// A ReplicaSet picks the pods it deletes by readiness and age; among Ready
// pods it deletes the lowest controller.kubernetes.io/pod-deletion-cost
// first. Before a scale-down the engine sets that annotation on the
// variant's Ready pods to their running requests, so a replica streaming
// long generations outlives an idle one.
//
// StatefulSets delete the highest ordinal and LeaderWorkerSets the highest
// group index whatever the annotation, so their pods are left alone.
package deletioncost

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// Annotation is the annotation the ReplicaSet controller ranks pods by.
const Annotation = corev1.PodDeletionCost

// Costs is the deletion cost of each Ready pod: its running requests,
// rounded (an idle pod costs 0, the cheapest). A pod without a sample, or
// with a NaN, infinite or negative one, gets nil: no annotation, which the
// ReplicaSet reads as 0 too, since nothing is known to protect it. Costs
// are capped at the annotation's int32 range.
func Costs(readyPods []string, running map[string]float64) map[string]*int32 {
	out := make(map[string]*int32, len(readyPods))
	for _, pod := range readyPods {
		r, ok := running[pod]
		if !ok || math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			out[pod] = nil
			continue
		}
		c := int32(math.MaxInt32)
		if r < math.MaxInt32 {
			c = int32(math.Round(r))
		}
		out[pod] = &c
	}
	return out
}
