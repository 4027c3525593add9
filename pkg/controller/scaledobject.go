package controller

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// KEDA's ScaledObject, by name only: importing KEDA's Go module would pull
// its Kubernetes library versions into ours.
var (
	ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	ScaledObjectGVR = llmdv1alpha1.ScaledObjectResource
)

// KEDA trigger types: external-push also calls StreamIsActive, so KEDA
// sees 0 <-> 1 decisions when they are made instead of on its next poll.
const KedaTriggerType = "external-push"

// scaledObjectSpec is the part of KEDA's ScaledObjectSpec wva sets; field
// names and JSON tags follow keda.sh/v1alpha1.
type scaledObjectSpec struct {
	ScaleTargetRef  scaleTarget   `json:"scaleTargetRef"`
	MinReplicaCount *int32        `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int32        `json:"maxReplicaCount,omitempty"`
	Advanced        *kedaAdvanced `json:"advanced,omitempty"`
	Triggers        []kedaTrigger `json:"triggers"`
}

type scaleTarget struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

type kedaAdvanced struct {
	HorizontalPodAutoscalerConfig *kedaHPAConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
}

type kedaHPAConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

type kedaTrigger struct {
	Type              string                 `json:"type"`
	Name              string                 `json:"name,omitempty"`
	Metadata          map[string]string      `json:"metadata"`
	AuthenticationRef *KedaAuthenticationRef `json:"authenticationRef,omitempty"`
}

// KedaAuthenticationRef names the (Cluster)TriggerAuthentication that gives
// KEDA the scaler's CA (caCert) and, for mutual TLS, its client certificate
// (tlsClientCert, tlsClientKey): KEDA reads these only from one.
type KedaAuthenticationRef struct {
	Name string `json:"name"`
	// Kind is TriggerAuthentication (KEDA's default when empty) or
	// ClusterTriggerAuthentication.
	Kind string `json:"kind,omitempty"`
}

// ParseKedaAuthenticationRef parses "[Kind/]name".
func ParseKedaAuthenticationRef(s string) (*KedaAuthenticationRef, error) {
	if s == "" {
		return nil, nil
	}
	kind, name, found := strings.Cut(s, "/")
	if !found {
		kind, name = "", kind
	}
	if kind != "" && kind != "TriggerAuthentication" && kind != "ClusterTriggerAuthentication" {
		return nil, fmt.Errorf("%q: kind %q: want TriggerAuthentication or ClusterTriggerAuthentication", s, kind)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%q: name %q: %s", s, name, strings.Join(errs, "; "))
	}
	return &KedaAuthenticationRef{Name: name, Kind: kind}, nil
}

// KedaScaler is how a ScaledObject's trigger reaches the adapter's scaler.
type KedaScaler struct {
	// Address is host:port.
	Address string
	// Authentication, when set, is the trigger's authenticationRef.
	Authentication *KedaAuthenticationRef
}

// DesiredScaledObject builds the KEDA ScaledObject for a VA, whose external
// trigger reads wva_desired_replicas from the adapter's scaler at
// scaler.Address (host:port). Pure, like DesiredHPA: comparing its result
// with the live object detects drift. The behavior carries no tolerance:
// KEDA CRDs that lack the field would prune it, and the object would never
// compare equal (an update storm).
func DesiredScaledObject(va *llmdv1alpha1.VariantAutoscaling, scaler KedaScaler) (*unstructured.Unstructured, error) {
	if scaler.Address == "" {
		return nil, fmt.Errorf("--keda-scaler-address is empty: a ScaledObject needs the adapter's scaler address (host:port)")
	}
	behavior, err := BehaviorFor(va, Capabilities{})
	ref := va.Spec.ScaleTargetRef
	apiVersion := ref.APIVersion
	if gvk, gerr := ref.GroupVersionKind(); gerr == nil && apiVersion == "" {
		apiVersion = gvk.GroupVersion().String()
	}
	spec := scaledObjectSpec{
		ScaleTargetRef: scaleTarget{APIVersion: apiVersion, Kind: ref.Kind, Name: ref.Name},
		// KEDA owns 0 <-> 1 (IsActive), its HPA 1 <-> N: a VA minimum
		// of 0 goes straight through, whatever the cluster's HPA gates.
		MinReplicaCount: ptr.To(va.MinReplicasOrDefault()),
		MaxReplicaCount: ptr.To(va.MaxReplicasOrDefault()),
		Advanced:        &kedaAdvanced{HorizontalPodAutoscalerConfig: &kedaHPAConfig{Behavior: behavior}},
		Triggers: []kedaTrigger{{
			Type: KedaTriggerType,
			Name: "wva",
			Metadata: map[string]string{
				"scalerAddress":                    scaler.Address,
				llmdv1alpha1.KEDAMetadataNamespace: va.Namespace,
				llmdv1alpha1.KEDAMetadataVariant:   va.Name,
			},
			AuthenticationRef: scaler.Authentication,
		}},
	}
	content, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if cerr != nil {
		return nil, fmt.Errorf("ScaledObject %s/%s: %w", va.Namespace, va.Name, cerr)
	}
	so := &unstructured.Unstructured{Object: map[string]any{"spec": content}}
	so.SetGroupVersionKind(ScaledObjectGVK)
	so.SetName(va.Name)
	so.SetNamespace(va.Namespace)
	so.SetLabels(map[string]string{llmdv1alpha1.LabelManagedBy: llmdv1alpha1.ManagedByWVA, llmdv1alpha1.LabelVariantAutoscaling: va.Name})
	so.SetOwnerReferences([]metav1.OwnerReference{vaOwnerRef(va)})
	return so, err
}

// ScaledObjectInSync says whether the live ScaledObject has every spec
// field and label DesiredScaledObject sets. Fields wva does not set
// (pollingInterval, fallback, ...) are the user's: they never count as drift.
func ScaledObjectInSync(live, desired *unstructured.Unstructured) bool {
	if !labelsInclude(live, desired) || !ownedBy(live, desired.GetOwnerReferences()[0].UID) {
		return false
	}
	liveSpec, _, _ := unstructured.NestedMap(live.Object, "spec")
	desiredSpec, _, _ := unstructured.NestedMap(desired.Object, "spec")
	for k, v := range desiredSpec {
		if !equality.Semantic.DeepEqual(liveSpec[k], v) {
			return false
		}
	}
	return true
}

// ApplyScaledObject copies the wva-owned fields of desired onto live.
func ApplyScaledObject(live, desired *unstructured.Unstructured) *unstructured.Unstructured {
	out := live.DeepCopy()
	applyMeta(out, desired)
	spec, _, _ := unstructured.NestedMap(out.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	desiredSpec, _, _ := unstructured.NestedMap(desired.Object, "spec")
	for k, v := range desiredSpec {
		spec[k] = v
	}
	_ = unstructured.SetNestedMap(out.Object, spec, "spec")
	return out
}
