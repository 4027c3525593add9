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

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults applied by the API server (see the +kubebuilder:default markers
// below). The helper methods fall back to the same values for objects that
// were built in Go and never went through API-server defaulting.
const (
	// DefaultMinReplicas is the default of spec.minReplicas.
	DefaultMinReplicas int32 = 1
	// DefaultMaxReplicas is the default of spec.maxReplicas.
	DefaultMaxReplicas int32 = 2
	// DefaultVariantCost is the default of spec.variantCost.
	DefaultVariantCost = "10.0"
)

// Kinds accepted in spec.scaleTargetRef.kind.
const (
	ScaleTargetKindDeployment      = "Deployment"
	ScaleTargetKindStatefulSet     = "StatefulSet"
	ScaleTargetKindLeaderWorkerSet = "LeaderWorkerSet"
)

// Default API versions of the supported scale target kinds, used when
// spec.scaleTargetRef.apiVersion is empty.
const (
	AppsAPIVersion            = "apps/v1"
	LeaderWorkerSetAPIVersion = "leaderworkerset.x-k8s.io/v1"
)

// Condition types set in status.conditions.
const (
	// ConditionTypeTargetResolved reports whether spec.scaleTargetRef points
	// at an existing workload of a supported kind.
	ConditionTypeTargetResolved = "TargetResolved"
	// ConditionTypeMetricsAvailable reports whether the metrics needed to
	// size the variant could be collected.
	ConditionTypeMetricsAvailable = "MetricsAvailable"
	// ConditionTypeOptimizationReady reports whether the last optimization
	// run produced a desired allocation.
	ConditionTypeOptimizationReady = "OptimizationReady"
	// ConditionTypeHPAReady reports whether the companion controller's HPA
	// for the variant exists and matches the VA (set by `wva controller`).
	ConditionTypeHPAReady = "HPAReady"
	// ConditionTypeConfigValid reports whether every wva ConfigMap entry
	// meant for the variant's model (the default entries concern every
	// model) is valid; while one is not, its last valid version applies.
	ConditionTypeConfigValid = "ConfigValid"
	// ConditionTypeTransitionStuck is True while a variant of the model has
	// been in transition (desired != current, or pods not reporting) for
	// longer than its bound (twice its start-up); it no longer blocks the
	// other variants' decisions.
	ConditionTypeTransitionStuck = "TransitionStuck"
	// ConditionTypeInferencePoolResolved reports which InferencePool
	// (inference.networking.k8s.io/v1) selects the scale target's pods and
	// which endpoint picker it names; set only while the API is served.
	ConditionTypeInferencePoolResolved = "InferencePoolResolved"
	// ConditionTypeGPUBudgeted reports whether the variant's scale-ups are
	// admitted against a GPU budget pool (its GPUs and GPU memory); set only
	// while the adapter has a budget source.
	ConditionTypeGPUBudgeted = "GPUBudgeted"
)

// Condition reasons set in status.conditions.
const (
	// TargetResolved reasons.
	ReasonTargetFound           = "TargetFound"
	ReasonTargetNotFound        = "TargetNotFound"
	ReasonUnsupportedTargetKind = "UnsupportedTargetKind"
	// ReasonSharedScaleTarget: another VA scales the same target; its pods
	// would count twice in the model's group, so wva decides for none of
	// them and their last decisions stay in force.
	ReasonSharedScaleTarget = "SharedScaleTarget"

	// MetricsAvailable reasons.
	ReasonMetricsFound       = "MetricsFound"
	ReasonMetricsMissing     = "MetricsMissing"
	ReasonMetricsStale       = "MetricsStale"
	ReasonMetricsUnavailable = "MetricsUnavailable"
	ReasonPrometheusError    = "PrometheusError"
	// ReasonRequestCountMissing: pods are Ready and report saturation
	// metrics, but vllm:request_success_total has no series for the model
	// (a scraping fault). Idle detection has no evidence, so the group is
	// not scaled to zero or down while it lasts.
	ReasonRequestCountMissing = "RequestCountMissing"
	// ReasonMetricsMissingWithReadyPods: the scale target has Ready pods but
	// none reports saturation metrics (a scraping fault, not idleness). The
	// replicas are held; the retention fallback does not apply.
	ReasonMetricsMissingWithReadyPods = "MetricsMissingWithReadyPods"

	// TransitionStuck reasons.
	ReasonStuckTransition   = "StuckTransition"
	ReasonNoStuckTransition = "NoStuckTransition"

	// OptimizationReady reasons.
	ReasonOptimizationSucceeded = "OptimizationSucceeded"
	ReasonOptimizationFailed    = "OptimizationFailed"
	ReasonInvalidSpec           = "InvalidSpec"

	// ConfigValid reasons.
	ReasonConfigApplied = "ConfigApplied"
	ReasonInvalidConfig = "InvalidConfig"

	// InferencePoolResolved reasons: one pool selects the pods, none does,
	// several do (ambiguous: the gateway routes through one of them).
	ReasonPoolFound     = "PoolFound"
	ReasonNoPoolMatches = "NoPoolMatches"
	ReasonMultiplePools = "MultiplePools"

	// GPUBudgeted reasons: budgeted by a pool; no pool applies; the pool
	// named by the node-pool annotation is not defined (its scale-ups are
	// refused); the pool limits GPU memory and spec.gpuMemoryPerReplica is
	// unset.
	ReasonBudgeted              = "Budgeted"
	ReasonNoPool                = "NoPool"
	ReasonUnknownPool           = "UnknownPool"
	ReasonNoGPUMemoryPerReplica = "NoGPUMemoryPerReplica"

	// HPAReady reasons.
	ReasonHPASynced          = "HPASynced"
	ReasonHPAConflict        = "HPAConflict"
	ReasonHPAError           = "HPAError"
	ReasonInvalidHPABehavior = "InvalidHPABehavior"
	// With `wva controller --output=scaledobject` the HPA is KEDA's, made
	// from wva's ScaledObject; HPAReady then reports on the ScaledObject.
	ReasonScaledObjectSynced   = "ScaledObjectSynced"
	ReasonScaledObjectConflict = "ScaledObjectConflict"
)

// CrossVersionObjectReference identifies the workload a VariantAutoscaling
// scales. It has the same wire shape as autoscaling/v2
// CrossVersionObjectReference, restricted to the supported kinds.
type CrossVersionObjectReference struct {
	// apiVersion is the API version of the referent, e.g. "apps/v1" or
	// "leaderworkerset.x-k8s.io/v1". When empty, the default API version of
	// the kind is assumed.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// kind is the kind of the referent.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;LeaderWorkerSet
	// +required
	Kind string `json:"kind"`

	// name is the name of the referent, in the namespace of the
	// VariantAutoscaling.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// VariantAutoscalingSpec is the desired state of a VariantAutoscaling: one
// model-serving variant (a workload running one model on one accelerator
// arrangement) and the bounds within which it may be scaled.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas"
type VariantAutoscalingSpec struct {
	// scaleTargetRef references the workload (Deployment, StatefulSet or
	// LeaderWorkerSet) whose replicas are managed.
	// +required
	ScaleTargetRef CrossVersionObjectReference `json:"scaleTargetRef"`

	// modelID is the identifier of the model served by the variant, as
	// reported in the inference server metrics (e.g. "meta/llama-3.1-8b").
	// +kubebuilder:validation:MinLength=1
	// +required
	ModelID string `json:"modelID"`

	// minReplicas is the lower bound on the replica count. 0 allows scaling
	// the variant to zero.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the upper bound on the replica count.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`

	// variantCost is the cost of one replica of this variant, a
	// non-negative decimal number written as a string (e.g. "10.0"), at
	// most 1000000 (MaxVariantCost).
	// +kubebuilder:default="10.0"
	// +kubebuilder:validation:Pattern=`^0*(\d{1,6}(\.\d+)?|1000000(\.0+)?)$`
	// +optional
	VariantCost string `json:"variantCost,omitempty"`

	// acceleratorName is the name of the accelerator type used by the
	// variant (e.g. "H100").
	// +optional
	AcceleratorName string `json:"acceleratorName,omitempty"`

	// gpusPerReplica is the number of GPUs used by one replica.
	// +kubebuilder:validation:Minimum=0
	// +optional
	GPUsPerReplica *int32 `json:"gpusPerReplica,omitempty"`

	// scaleToZeroRetention, when set, replaces the scale-to-zero retention
	// period of the wva-model-scale-to-zero-config ConfigMap for this
	// variant: its model group goes to zero only after no request for the
	// longest retention among its variants. A duration such as "30m",
	// from 1m to 168h (7 days, the longest request-count window).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="scaleToZeroRetention must be a duration from 1m to 168h"
	// +optional
	ScaleToZeroRetention *metav1.Duration `json:"scaleToZeroRetention,omitempty"`

	// gpuMemoryPerReplica is the GPU memory used by one replica.
	// +optional
	GPUMemoryPerReplica *resource.Quantity `json:"gpuMemoryPerReplica,omitempty"`
}

// OptimizedAlloc is the allocation computed by the autoscaler for the variant.
type OptimizedAlloc struct {
	// numReplicas is the desired number of replicas.
	// +kubebuilder:validation:Minimum=0
	// +optional
	NumReplicas int32 `json:"numReplicas"`

	// reason explains why numReplicas has its current value.
	// +optional
	Reason string `json:"reason,omitempty"`

	// accelerator is the accelerator chosen for the variant.
	//
	// Deprecated: kept for compatibility with older clients; the accelerator
	// is given by spec.acceleratorName.
	// +optional
	Accelerator string `json:"accelerator,omitempty"`

	// lastRunTime is when the optimizer last produced this allocation.
	// +optional
	LastRunTime metav1.Time `json:"lastRunTime,omitempty"`

	// lastUpdate is when numReplicas or reason last changed.
	// +optional
	LastUpdate metav1.Time `json:"lastUpdate,omitempty"`
}

// ActuationStatus reports whether the desired allocation has been applied.
type ActuationStatus struct {
	// applied is true when the desired allocation was successfully applied
	// (or published for an external actuator such as the HPA).
	// +optional
	Applied bool `json:"applied"`
}

// VariantAutoscalingStatus is the observed state of a VariantAutoscaling.
type VariantAutoscalingStatus struct {
	// desiredOptimizedAlloc is the latest allocation computed for the variant.
	// +optional
	DesiredOptimizedAlloc OptimizedAlloc `json:"desiredOptimizedAlloc,omitempty"`

	// currentReplicas is the replica count last observed on the scale target.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CurrentReplicas int32 `json:"currentReplicas"`

	// actuation reports whether desiredOptimizedAlloc has been applied.
	// +optional
	Actuation ActuationStatus `json:"actuation,omitempty"`

	// conditions are the latest observations of the VariantAutoscaling's
	// state (types TargetResolved, MetricsAvailable, OptimizationReady).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// VariantAutoscaling asks the autoscaler to size one model-serving variant
// between minReplicas and maxReplicas.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=variantautoscalings,singular=variantautoscaling,scope=Namespaced,shortName=va
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.modelID`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredOptimizedAlloc.numReplicas`
// +kubebuilder:printcolumn:name="Metrics",type=string,JSONPath=`.status.conditions[?(@.type=="MetricsAvailable")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.desiredOptimizedAlloc.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VariantAutoscaling struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the VariantAutoscaling.
	// +required
	Spec VariantAutoscalingSpec `json:"spec"`

	// status is the observed state of the VariantAutoscaling.
	// +optional
	Status VariantAutoscalingStatus `json:"status,omitempty"`
}

// VariantAutoscalingList is a list of VariantAutoscaling objects.
//
// +kubebuilder:object:root=true
type VariantAutoscalingList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []VariantAutoscaling `json:"items"`
}

// DecidedBeforeWake says whether the decision of record
// (status.desiredOptimizedAlloc) is older than the scale-from-zero fast
// path's last wake (AnnotationScaledFromZeroAt). lastRunTime has whole
// seconds: a decision in the wake's second counts as older (the engine
// keeps a woken group at >= 1 anyway, so this only waits one more cycle).
func (va *VariantAutoscaling) DecidedBeforeWake() bool {
	s, ok := va.Annotations[AnnotationScaledFromZeroAt]
	if !ok {
		return false
	}
	woke, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return false
	}
	return !va.Status.DesiredOptimizedAlloc.LastRunTime.After(woke)
}

// ServedReplicas is the desired replica count wva serves for the VA: the
// decision of record, but at least 1 while that decision predates the
// fast path's last wake, so a scaler reading it between the wake and the
// engine's next cycle does not take the woken target back to 0.
func (va *VariantAutoscaling) ServedReplicas() int32 {
	n := va.Status.DesiredOptimizedAlloc.NumReplicas
	if n == 0 && va.DecidedBeforeWake() {
		return 1
	}
	return n
}

// MinReplicasOrDefault returns spec.minReplicas, or DefaultMinReplicas when
// it is unset.
func (va *VariantAutoscaling) MinReplicasOrDefault() int32 {
	if va.Spec.MinReplicas == nil {
		return DefaultMinReplicas
	}
	return *va.Spec.MinReplicas
}

// MaxReplicasOrDefault returns spec.maxReplicas, or DefaultMaxReplicas when
// it is unset (zero).
func (va *VariantAutoscaling) MaxReplicasOrDefault() int32 {
	if va.Spec.MaxReplicas == 0 {
		return DefaultMaxReplicas
	}
	return va.Spec.MaxReplicas
}

// MaxVariantCost bounds variantCost (spec.variantCost, the
// llm-d.ai/variant-cost annotation, a snapshot's cost): far above any real
// price, low enough that sums of costs over replicas and variants stay
// finite and exact enough to keep the cheapest mix the cheapest.
const MaxVariantCost = 1e6

var (
	// variantCostShape is a non-negative decimal number, of any size.
	variantCostShape = regexp.MustCompile(`^\d+(\.\d+)?$`)
	// variantCostPattern mirrors the CRD validation pattern of
	// spec.variantCost: the shape, at most MaxVariantCost.
	variantCostPattern = regexp.MustCompile(`^0*(\d{1,6}(\.\d+)?|1000000(\.0+)?)$`)
)

// CostValue parses spec.variantCost. An empty value yields the default
// cost (DefaultVariantCost). Values that the CRD schema would reject
// (negative, signed, exponent notation, NaN/Inf, surrounding spaces, above
// MaxVariantCost) return an error.
func (va *VariantAutoscaling) CostValue() (float64, error) {
	return ParseVariantCost(va.Spec.VariantCost)
}

// ParseVariantCost parses a variantCost string; see CostValue.
func ParseVariantCost(s string) (float64, error) {
	if s == "" {
		s = DefaultVariantCost
	}
	if !variantCostShape.MatchString(s) {
		return 0, fmt.Errorf("invalid variantCost %q: must be a non-negative decimal number such as \"10.0\"", s)
	}
	if !variantCostPattern.MatchString(s) {
		return 0, fmt.Errorf("invalid variantCost %q: must be at most %s", s, strconv.FormatFloat(MaxVariantCost, 'f', -1, 64))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid variantCost %q: %w", s, err)
	}
	if !(v >= 0 && v <= MaxVariantCost) { // the pattern's bound, kept should the pattern change
		return 0, fmt.Errorf("invalid variantCost %q: must be at most %s", s, strconv.FormatFloat(MaxVariantCost, 'f', -1, 64))
	}
	return v, nil
}

// MaxGPUsPerReplica bounds the llm-d.ai/gpus-per-replica annotation and a
// snapshot's gpusPerReplica: far above any real replica, low enough that
// replicas times GPUs stay exact.
const MaxGPUsPerReplica = 1024

// ParseGPUsPerReplica parses the llm-d.ai/gpus-per-replica annotation: a
// whole number in [0, MaxGPUsPerReplica], as spec.gpusPerReplica (0, like
// the field unset, is unknown and counts as 1 GPU).
func ParseGPUsPerReplica(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 0 || v > MaxGPUsPerReplica {
		return 0, fmt.Errorf("invalid gpusPerReplica %q: must be a whole number in [0, %d]", s, MaxGPUsPerReplica)
	}
	return int32(v), nil
}

// Bounds of spec.scaleToZeroRetention (and
// llm-d.ai/scale-to-zero-retention): the shortest is the ConfigMap's
// shortest retention_period (config.MinRetentionPeriod), the longest the
// collector's longest request-count window (collector.IdleWindows), so the
// window counting requests always covers the retention. Tests keep them
// equal.
const (
	MinScaleToZeroRetention = time.Minute
	MaxScaleToZeroRetention = 7 * 24 * time.Hour
)

// ParseScaleToZeroRetention parses a retention such as "30m": a Go
// duration in [MinScaleToZeroRetention, MaxScaleToZeroRetention], as the
// CRD validates spec.scaleToZeroRetention.
func ParseScaleToZeroRetention(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < MinScaleToZeroRetention || d > MaxScaleToZeroRetention {
		return 0, fmt.Errorf("invalid scaleToZeroRetention %q: must be a duration from %s to %s such as \"30m\"",
			s, MinScaleToZeroRetention, MaxScaleToZeroRetention)
	}
	return d, nil
}

// RetentionOverride is spec.scaleToZeroRetention when set to a value the
// CRD accepts; false otherwise (the ConfigMap's retention applies).
func (va *VariantAutoscaling) RetentionOverride() (time.Duration, bool) {
	r := va.Spec.ScaleToZeroRetention
	if r == nil || r.Duration < MinScaleToZeroRetention || r.Duration > MaxScaleToZeroRetention {
		return 0, false
	}
	return r.Duration, true
}

// GroupVersionKind returns the group/version/kind of the referenced
// workload. An empty apiVersion defaults to apps/v1 for Deployment and
// StatefulSet and to leaderworkerset.x-k8s.io/v1 for LeaderWorkerSet.
func (r CrossVersionObjectReference) GroupVersionKind() (schema.GroupVersionKind, error) {
	var defaultAPIVersion string
	switch r.Kind {
	case ScaleTargetKindDeployment, ScaleTargetKindStatefulSet:
		defaultAPIVersion = AppsAPIVersion
	case ScaleTargetKindLeaderWorkerSet:
		defaultAPIVersion = LeaderWorkerSetAPIVersion
	default:
		return schema.GroupVersionKind{}, fmt.Errorf("unsupported scaleTargetRef kind %q: must be one of %s, %s, %s",
			r.Kind, ScaleTargetKindDeployment, ScaleTargetKindStatefulSet, ScaleTargetKindLeaderWorkerSet)
	}
	apiVersion := r.APIVersion
	if apiVersion == "" {
		apiVersion = defaultAPIVersion
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("invalid scaleTargetRef apiVersion %q: %w", apiVersion, err)
	}
	return gv.WithKind(r.Kind), nil
}
