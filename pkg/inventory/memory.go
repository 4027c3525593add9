package inventory

import (
	"context"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// Memory holds the opted-in objects' variants of the last inventory pass with the
// status the engine last wrote for them: it stands in for VA status, which
// such variants do not have.
type Memory struct {
	// Changed, when set, is called after a variant's decision changes or
	// variants come or go, so the KEDA scaler's streams re-check: a VA's
	// decision reaches them through the VA informer, these have no object.
	Changed func()

	mu  sync.RWMutex
	vas map[string]*llmdv1alpha1.VariantAutoscaling
}

func key(namespace, name string) string { return namespace + "/" + name }

// Sync makes vas the current opted-in variants: each gets the status
// kept for its name (same UID), and variants no longer present are
// forgotten, so their metric stops being served.
func (m *Memory) Sync(vas []*llmdv1alpha1.VariantAutoscaling) {
	m.mu.Lock()
	next := make(map[string]*llmdv1alpha1.VariantAutoscaling, len(vas))
	changed := len(vas) != len(m.vas)
	for _, va := range vas {
		k := key(va.Namespace, va.Name)
		if old, ok := m.vas[k]; ok && old.UID == va.UID {
			va.Status = *old.Status.DeepCopy()
		} else {
			changed = true
		}
		next[k] = va.DeepCopy()
	}
	m.vas = next
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

// WriteStatus records the engine's status for a variant still present.
func (m *Memory) WriteStatus(va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) {
	m.mu.Lock()
	changed := false
	if cur, ok := m.vas[key(va.Namespace, va.Name)]; ok && cur.UID == va.UID {
		next := cur.DeepCopy()
		llmdv1alpha1.MergeEngineStatus(&next.Status, status)
		m.vas[key(va.Namespace, va.Name)] = next
		od, nd := cur.Status.DesiredOptimizedAlloc, next.Status.DesiredOptimizedAlloc
		changed = od.NumReplicas != nd.NumReplicas || od.LastRunTime.IsZero() != nd.LastRunTime.IsZero()
	}
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

func (m *Memory) changed() {
	if m.Changed != nil {
		m.Changed()
	}
}

func (m *Memory) get(namespace, name string) (*llmdv1alpha1.VariantAutoscaling, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	va, ok := m.vas[key(namespace, name)]
	return va, ok
}

func (m *Memory) list(namespace string) []*llmdv1alpha1.VariantAutoscaling {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*llmdv1alpha1.VariantAutoscaling
	for _, va := range m.vas {
		if namespace == "" || va.Namespace == namespace {
			out = append(out, va)
		}
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i].Namespace, out[i].Name) < key(out[j].Namespace, out[j].Name) })
	return out
}

// VAStatusWriter writes a VA's status (the engine's API server writer).
type VAStatusWriter interface {
	WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) error
}

// StatusWriter writes VA status through Next and keeps opted-in
// variants' status in Memory (there is no object to write).
type StatusWriter struct {
	Next   VAStatusWriter
	Memory *Memory
}

// WriteStatus implements VAStatusWriter (the engine's StatusWriter).
func (w StatusWriter) WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) error {
	if IsOptedIn(va) {
		w.Memory.WriteStatus(va, status)
		return nil
	}
	return w.Next.WriteStatus(ctx, va, status)
}

// Lister serves VAs from the informer lister and, for names no VA has, the
// opted-in variants in Memory: the provider and the KEDA scaler read
// decisions through it unchanged.
func Lister(vas llmdlisters.VariantAutoscalingLister, m *Memory) llmdlisters.VariantAutoscalingLister {
	return lister{vas: vas, m: m}
}

type lister struct {
	vas llmdlisters.VariantAutoscalingLister
	m   *Memory
}

func (l lister) List(selector labels.Selector) ([]*llmdv1alpha1.VariantAutoscaling, error) {
	return l.merge("", selector, l.vas.List)
}

func (l lister) VariantAutoscalings(namespace string) llmdlisters.VariantAutoscalingNamespaceLister {
	return nsLister{l: l, namespace: namespace}
}

func (l lister) merge(namespace string, selector labels.Selector,
	list func(labels.Selector) ([]*llmdv1alpha1.VariantAutoscaling, error)) ([]*llmdv1alpha1.VariantAutoscaling, error) {
	out, err := list(selector)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(out))
	for _, va := range out {
		seen[key(va.Namespace, va.Name)] = true
	}
	for _, va := range l.m.list(namespace) {
		if !seen[key(va.Namespace, va.Name)] && selector.Matches(labels.Set(va.Labels)) {
			out = append(out, va)
		}
	}
	return out, nil
}

type nsLister struct {
	l         lister
	namespace string
}

func (n nsLister) List(selector labels.Selector) ([]*llmdv1alpha1.VariantAutoscaling, error) {
	return n.l.merge(n.namespace, selector, n.l.vas.VariantAutoscalings(n.namespace).List)
}

func (n nsLister) Get(name string) (*llmdv1alpha1.VariantAutoscaling, error) {
	va, err := n.l.vas.VariantAutoscalings(n.namespace).Get(name)
	if apierrors.IsNotFound(err) {
		if mva, ok := n.l.m.get(n.namespace, name); ok {
			return mva, nil
		}
	}
	return va, err
}

// Recorder sends the engine's Events about an opted-in variant to its HPA
// or ScaledObject (the VA they would name does not exist).
type Recorder struct{ record.EventRecorder }

func (r Recorder) target(obj runtime.Object) runtime.Object {
	if va, ok := obj.(*llmdv1alpha1.VariantAutoscaling); ok {
		if ref, ok := SourceOf(va); ok {
			return ref
		}
	}
	return obj
}

func (r Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.EventRecorder.Event(r.target(obj), eventtype, reason, message)
}

func (r Recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.EventRecorder.Eventf(r.target(obj), eventtype, reason, messageFmt, args...)
}

func (r Recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.EventRecorder.AnnotatedEventf(r.target(obj), annotations, eventtype, reason, messageFmt, args...)
}
