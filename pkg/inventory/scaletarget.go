package inventory

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// TargetListers are the informer caches ResolveTarget reads.
type TargetListers struct {
	Deployments  appslisters.DeploymentLister
	StatefulSets appslisters.StatefulSetLister
	// LeaderWorkerSets is nil when the LWS API is not installed.
	LeaderWorkerSets cache.GenericLister
}

// ScaleTarget is a resolved scale target.
type ScaleTarget struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
	ResourceVersion string
	// Replicas is spec.replicas (1 when unset, the API default); for an LWS
	// the number of groups.
	Replicas int32
	// ReadyReplicas is status.readyReplicas; for an LWS the groups whose
	// pods are all Ready.
	ReadyReplicas int32
	// PodsPerReplica is 1, or an LWS's spec.leaderWorkerTemplate.size.
	PodsPerReplica int32
	// ServingSelector selects one pod per replica, the one that serves
	// (for an LWS, the leaders).
	ServingSelector labels.Selector
	// PodSelector selects every pod of the target (for an LWS, workers
	// too); never empty.
	PodSelector labels.Selector
	// Template is the serving pod's spec and TemplateLabels its labels
	// (the role label among them).
	Template       corev1.PodSpec
	TemplateLabels map[string]string
}

// Unresolved is the error ResolveTarget returns: Reason is a TargetResolved
// condition reason (ReasonTargetNotFound or ReasonUnsupportedTargetKind).
type Unresolved struct {
	Reason, Message string
}

func (u *Unresolved) Error() string { return u.Reason + ": " + u.Message }

// ResolveTarget finds va's scale target in the listers; the error is always an
// *Unresolved.
func ResolveTarget(l TargetListers, va *llmdv1alpha1.VariantAutoscaling) (ScaleTarget, error) {
	ref := va.Spec.ScaleTargetRef
	gvk, err := ref.GroupVersionKind()
	if err != nil {
		return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonUnsupportedTargetKind, Message: err.Error()}
	}
	notFound := func(err error) error {
		if apierrors.IsNotFound(err) {
			return &Unresolved{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: fmt.Sprintf("%s %s/%s not found", ref.Kind, va.Namespace, ref.Name)}
		}
		return &Unresolved{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: err.Error()}
	}
	t := ScaleTarget{GVK: gvk, Namespace: va.Namespace, Name: ref.Name, PodsPerReplica: 1}
	var sel *metav1.LabelSelector
	switch gvk.Kind {
	case llmdv1alpha1.ScaleTargetKindDeployment:
		d, err := l.Deployments.Deployments(va.Namespace).Get(ref.Name)
		if err != nil {
			return ScaleTarget{}, notFound(err)
		}
		t.ResourceVersion, t.Replicas, t.ReadyReplicas = d.ResourceVersion, replicasOr1(d.Spec.Replicas), d.Status.ReadyReplicas
		t.Template, t.TemplateLabels, sel = d.Spec.Template.Spec, d.Spec.Template.Labels, d.Spec.Selector
	case llmdv1alpha1.ScaleTargetKindStatefulSet:
		s, err := l.StatefulSets.StatefulSets(va.Namespace).Get(ref.Name)
		if err != nil {
			return ScaleTarget{}, notFound(err)
		}
		t.ResourceVersion, t.Replicas, t.ReadyReplicas = s.ResourceVersion, replicasOr1(s.Spec.Replicas), s.Status.ReadyReplicas
		t.Template, t.TemplateLabels, sel = s.Spec.Template.Spec, s.Spec.Template.Labels, s.Spec.Selector
	case llmdv1alpha1.ScaleTargetKindLeaderWorkerSet:
		if l.LeaderWorkerSets == nil {
			return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonUnsupportedTargetKind,
				Message: "LeaderWorkerSet API (leaderworkerset.x-k8s.io) is not installed in the cluster"}
		}
		obj, err := l.LeaderWorkerSets.ByNamespace(va.Namespace).Get(ref.Name)
		if err != nil {
			return ScaleTarget{}, notFound(err)
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: fmt.Sprintf("unexpected LeaderWorkerSet object %T", obj)}
		}
		return leaderWorkerSet(t, u), nil
	default:
		return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonUnsupportedTargetKind, Message: fmt.Sprintf("unsupported scale target kind %q", ref.Kind)}
	}
	ps, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: fmt.Sprintf("scale target has an invalid pod selector: %v", err)}
	}
	if ps.Empty() {
		// It would match every pod in the namespace.
		return ScaleTarget{}, &Unresolved{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: "scale target has an empty pod selector"}
	}
	t.ServingSelector, t.PodSelector = ps, ps
	return t, nil
}

func leaderWorkerSet(t ScaleTarget, u *unstructured.Unstructured) ScaleTarget {
	t.ResourceVersion = u.GetResourceVersion()
	t.Replicas = nestedInt32(u, 1, "spec", "replicas")
	t.ReadyReplicas = nestedInt32(u, 0, "status", "readyReplicas")
	t.PodsPerReplica = nestedInt32(u, 1, "spec", "leaderWorkerTemplate", "size")
	t.PodSelector = labels.SelectorFromSet(labels.Set{llmdv1alpha1.LabelLWSName: t.Name})
	t.ServingSelector = labels.SelectorFromSet(labels.Set{llmdv1alpha1.LabelLWSName: t.Name, llmdv1alpha1.LabelLWSWorkerIndex: "0"})
	which := "leaderTemplate"
	tmpl, found, _ := unstructured.NestedMap(u.Object, "spec", "leaderWorkerTemplate", which, "spec")
	if !found {
		which = "workerTemplate"
		tmpl, _, _ = unstructured.NestedMap(u.Object, "spec", "leaderWorkerTemplate", which, "spec")
	}
	t.TemplateLabels, _, _ = unstructured.NestedStringMap(u.Object, "spec", "leaderWorkerTemplate", which, "metadata", "labels")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &t.Template); err != nil {
		t.Template = corev1.PodSpec{} // a malformed template reads as empty
	}
	return t
}

// nestedInt32 reads an integer field, def when absent or not an integer.
func nestedInt32(u *unstructured.Unstructured, def int32, fields ...string) int32 {
	v, found, err := unstructured.NestedInt64(u.Object, fields...)
	if !found || err != nil {
		return def
	}
	return int32(v)
}

func replicasOr1(r *int32) int32 {
	if r == nil {
		return 1 // the API default for Deployments and StatefulSets
	}
	return *r
}
