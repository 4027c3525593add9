// Package inferencepool finds the endpoint picker (EPP) of a variant the way
// the Gateway API Inference Extension does: the InferencePool
// (inference.networking.k8s.io/v1) whose spec.selector matches the
// variant's pods names its EPP in spec.endpointPickerRef. The published Go
// types are not a dependency (they pin other k8s.io versions): the few
// fields read here are taken from unstructured objects.
package inferencepool

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Resource is the InferencePool API this package reads.
var Resource = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// Pool is what wva reads of an InferencePool.
type Pool struct {
	Namespace, Name string
	// Selector is spec.selector.matchLabels: the pool's model server pods,
	// in the pool's namespace.
	Selector map[string]string
	// EPP is spec.endpointPickerRef.
	EPP EndpointPicker
}

// EndpointPicker is an InferencePool's spec.endpointPickerRef: a Service in
// the pool's namespace (the only kind the API defines) and its port (the
// ext-proc port the gateway dials, not the metrics port).
type EndpointPicker struct {
	Group, Kind, Name string
	Port              int32
	FailureMode       string
}

// Key is namespace/name.
func (p Pool) Key() string { return p.Namespace + "/" + p.Name }

// Service is the EPP Service's in-cluster host:port.
func (p Pool) Service() string {
	host := p.EPP.Name + "." + p.Namespace + ".svc"
	if p.EPP.Port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(p.EPP.Port)))
}

// Selects reports whether the pool selects pods with these labels in
// namespace. A pool never selects pods of another namespace; an empty
// selector selects every pod of its namespace, as it does for the EPP.
func (p Pool) Selects(namespace string, podLabels map[string]string) bool {
	return namespace == p.Namespace && labels.SelectorFromSet(p.Selector).Matches(labels.Set(podLabels))
}

// FromUnstructured reads a Pool; the API server validated the schema, so
// only shapes that cannot be used are errors (a selector that is not a
// string map, an EPP reference without a name).
func FromUnstructured(u *unstructured.Unstructured) (Pool, error) {
	p := Pool{Namespace: u.GetNamespace(), Name: u.GetName()}
	sel, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return p, fmt.Errorf("InferencePool %s: spec.selector.matchLabels: %w", p.Key(), err)
	}
	p.Selector = sel
	ref, found, err := unstructured.NestedMap(u.Object, "spec", "endpointPickerRef")
	if err != nil || !found {
		return p, fmt.Errorf("InferencePool %s: no spec.endpointPickerRef", p.Key())
	}
	str := func(k string) string { s, _ := ref[k].(string); return s }
	p.EPP = EndpointPicker{Group: str("group"), Kind: str("kind"), Name: str("name"), FailureMode: str("failureMode")}
	if p.EPP.Kind == "" {
		p.EPP.Kind = "Service"
	}
	if n, found, _ := unstructured.NestedFieldNoCopy(ref, "port", "number"); found {
		switch v := n.(type) {
		case int64:
			p.EPP.Port = int32(v)
		case float64:
			p.EPP.Port = int32(v)
		}
	}
	if p.EPP.Name == "" {
		return p, fmt.Errorf("InferencePool %s: spec.endpointPickerRef.name is empty", p.Key())
	}
	return p, nil
}

// Resolution is the pools that select a variant's pods.
type Resolution struct {
	// Pools that select the pods, by key.
	Pools []Pool
}

// Match finds the pools (of any namespace, in pools) that select pods
// with podLabels in namespace. Pure.
func Match(pools []Pool, namespace string, podLabels map[string]string) Resolution {
	var r Resolution
	for _, p := range pools {
		if p.Selects(namespace, podLabels) {
			r.Pools = append(r.Pools, p)
		}
	}
	sort.Slice(r.Pools, func(i, j int) bool { return r.Pools[i].Key() < r.Pools[j].Key() })
	return r
}

// Reason is the condition reason of the resolution.
func (r Resolution) Reason() string {
	switch len(r.Pools) {
	case 0:
		return llmdv1alpha1.ReasonNoPoolMatches
	case 1:
		return llmdv1alpha1.ReasonPoolFound
	default:
		return llmdv1alpha1.ReasonMultiplePools
	}
}

// Condition is the InferencePoolResolved condition of a VA (generation)
// whose pods the resolution is for: True with the pool and its EPP when one
// pool selects them; False otherwise, naming every pool when several do
// (the gateway routes through one of them, which is ambiguous).
func (r Resolution) Condition(generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: llmdv1alpha1.ConditionTypeInferencePoolResolved, Status: metav1.ConditionFalse, Reason: r.Reason(),
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	describe := func(p Pool) string {
		return fmt.Sprintf("InferencePool %s (endpoint picker %s %s)", p.Key(), p.EPP.Kind, p.Service())
	}
	switch len(r.Pools) {
	case 0:
		c.Message = "no InferencePool in the namespace selects the scale target's pod labels; the EPP's queue and arrivals are not tied to a pool"
	case 1:
		c.Status = metav1.ConditionTrue
		c.Message = describe(r.Pools[0]) + " selects the scale target's pods"
	default:
		names := make([]string, len(r.Pools))
		for i, p := range r.Pools {
			names[i] = describe(p)
		}
		c.Message = "several InferencePools select the scale target's pods: " + strings.Join(names, "; ")
	}
	return c
}

// SetCondition sets the resolution's condition in conditions.
func (r Resolution) SetCondition(conditions *[]metav1.Condition, generation int64, now time.Time) {
	meta.SetStatusCondition(conditions, r.Condition(generation, now))
}
