/*
Copyright The WVA Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// This file holds the names other programs see: HPAs and KEDA ScaledObjects
// select them, KEDA sends them, Prometheus scrapes them, kubectl users set
// them, and the LeaderWorkerSet controller writes them. Each is defined here
// once; renaming one breaks those programs, not just wva.

// The external metric wva serves and the Prometheus gauge of the same
// decision.
const (
	// MetricDesiredReplicas is the external metric HPAs select (served on
	// external.metrics.k8s.io) and the gauge the engine exports.
	MetricDesiredReplicas = "wva_desired_replicas"
	// MetricLabelVariantName names the VA in the metric's selector and on
	// wva's Prometheus series.
	MetricLabelVariantName = "variant_name"
	// MetricLabelVariantAutoscaling is accepted in place of
	// MetricLabelVariantName for upstream compatibility.
	MetricLabelVariantAutoscaling = "variant_autoscaling"
)

// Trigger metadata keys a KEDA ScaledObject's external trigger sets for
// wva's external scaler.
const (
	// KEDAMetadataVariant names the VariantAutoscaling; without it the
	// ScaledObject's own name is used (wva names its ScaledObjects after
	// the VA).
	KEDAMetadataVariant = "variantAutoscaling"
	// KEDAMetadataNamespace, when set, must be the ScaledObject's namespace:
	// a ScaledObject reads only VAs beside it.
	KEDAMetadataNamespace = "namespace"
)

// Labels wva sets on the HPAs and ScaledObjects it owns.
const (
	// LabelManagedBy with value ManagedByWVA marks the objects wva owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByWVA   = "wva"
	// LabelVariantAutoscaling names the VA an HPA or ScaledObject belongs to.
	LabelVariantAutoscaling = "llmd.ai/variant-autoscaling"
)

// The label upstream WVA requires on its ConfigMaps: wva reads a
// ConfigMap of one of the watched names only when it carries
// LabelConfigMapName=ConfigMapLabelValue.
const (
	LabelConfigMapName  = "app.kubernetes.io/name"
	ConfigMapLabelValue = "workload-variant-autoscaler"
)

// Annotations on a VariantAutoscaling.
const (
	// AnnotationHPABehavior overrides the HPA behavior: a JSON or YAML
	// autoscaling/v2 HorizontalPodAutoscalerBehavior.
	AnnotationHPABehavior = "wva.llmd.ai/hpa-behavior"
	// AnnotationAdoptHPA ("true") lets wva take over an existing HPA of the
	// same name that it does not own.
	AnnotationAdoptHPA = "wva.llmd.ai/adopt-hpa"
	// AnnotationNodePool names the VA's GPU budget pool explicitly, for
	// variants whose pod template does not carry the pool's node selector
	// (e.g. pools selected through node affinity).
	AnnotationNodePool = "wva.llmd.ai/node-pool"
	// AnnotationScaledFromZeroAt is set by `wva scale-from-zero` to the
	// time (RFC 3339 with nanoseconds) it scaled the VA's target from 0 to
	// 1. The decision engine reads it: a woken group is not sent back to
	// zero while its new replica starts and its first metrics arrive.
	AnnotationScaledFromZeroAt = "wva.llmd.ai/scaled-from-zero-at"
)

// Annotations on a user-owned autoscaling/v2 HPA or KEDA ScaledObject that
// opt it in the way upstream WVA v0.9 does: the object becomes a variant
// named after it, with its scale target and replica bounds, and wva serves
// wva_desired_replicas{variant_name=<object name>}. wva never writes it.
const (
	// AnnotationManaged ("true") opts the HPA or ScaledObject in.
	AnnotationManaged = "llm-d.ai/managed"
	// AnnotationModelID is the variant's modelID (required).
	AnnotationModelID = "llm-d.ai/model-id"
	// AnnotationVariantCost is the variant's cost per replica (optional,
	// default DefaultVariantCost).
	AnnotationVariantCost = "llm-d.ai/variant-cost"
	// AnnotationGPUsPerReplica is the variant's spec.gpusPerReplica
	// (optional; ParseGPUsPerReplica).
	AnnotationGPUsPerReplica = "llm-d.ai/gpus-per-replica"
	// AnnotationScaleToZeroRetention is the variant's
	// spec.scaleToZeroRetention (optional; ParseScaleToZeroRetention).
	AnnotationScaleToZeroRetention = "llm-d.ai/scale-to-zero-retention"
	// AnnotationRole is the variant's role, as LabelRole on its pod
	// template (which it overrides): "prefill", "decode" or "both";
	// optional, any other value is rejected.
	AnnotationRole = LabelRole
	// AnnotationFromHPA marks the in-memory VariantAutoscaling wva builds
	// from an opted-in HPA (value: the HPA's name). It never reaches the
	// API server: such a variant has no VA object to write status to.
	AnnotationFromHPA = "wva.llmd.ai/from-hpa"
	// AnnotationFromScaledObject is AnnotationFromHPA for an opted-in
	// ScaledObject.
	AnnotationFromScaledObject = "wva.llmd.ai/from-scaledobject"
)

// LabelRole on a scale target's pod template says the variant's part in
// prefill/decode disaggregated serving, as llm-d labels its pods: "prefill",
// "decode" or "both" (the default when absent or any other value).
const LabelRole = "llm-d.ai/role"

// KEDA's names wva reads: the ScaledObject resource and the label KEDA puts
// on the HPA it creates for a ScaledObject (that HPA is never a variant of
// its own: its ScaledObject is).
var ScaledObjectResource = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

const LabelKEDAScaledObject = "scaledobject.keda.sh/name"

// ReasonConflictingVariantAutoscaling is the Warning Event on an opted-in
// HPA or ScaledObject that a VariantAutoscaling overrides (same scale
// target or name).
const ReasonConflictingVariantAutoscaling = "ConflictingVariantAutoscaling"

// ReasonConflictingOptIn is the Warning Event on an opted-in HPA or
// ScaledObject left out for another opted-in object of the same scale
// target or name.
const ReasonConflictingOptIn = "ConflictingOptIn"

// ReasonInvalidAnnotations is the Warning Event on an opted-in HPA or
// ScaledObject whose annotations (or spec) cannot make a variant.
const ReasonInvalidAnnotations = "InvalidAnnotations"

// LabelGPUMemory is the per-GPU memory in MiB that NVIDIA GPU feature
// discovery puts on nodes; budget pools computed from nodes get a memory
// limit when every GPU node of the pool carries it.
const LabelGPUMemory = "nvidia.com/gpu.memory"

// LeaderWorkerSet names, written by the LWS controller: each LWS replica is
// a group of pods, and only the leader (worker index 0) counts as one
// replica and serves metrics.
const (
	LabelLWSName        = "leaderworkerset.sigs.k8s.io/name"
	LabelLWSWorkerIndex = "leaderworkerset.sigs.k8s.io/worker-index"
)

// LeaderWorkerSetResource is the resource wva lists when the LWS API is
// installed.
var LeaderWorkerSetResource = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
