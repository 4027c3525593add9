package inferencepool

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/daemon"
)

// Source reads InferencePools from an informer cache. A nil *Source is
// discovery turned off (the API is not served): it resolves nothing.
type Source struct {
	informer cache.SharedIndexInformer
	lister   cache.GenericLister
	factory  dynamicinformer.DynamicSharedInformerFactory
	// bad remembers the resourceVersion of each unusable pool logged, so
	// a broken pool is logged once, not every cycle.
	bad sync.Map
}

// NewSource watches InferencePools in namespace ("" = all) when the API is
// served at start-up; otherwise it logs that once and returns nil.
func NewSource(kube kubernetes.Interface, dyn dynamic.Interface, namespace string) *Source {
	if !daemon.APIServed(kube, Resource) {
		klog.InfoS("InferencePool API not served; endpoint pickers are found only through flags", "api", Resource.GroupVersion().String())
		return nil
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	inf := f.ForResource(Resource)
	return &Source{informer: inf.Informer(), lister: inf.Lister(), factory: f}
}

// Start starts the informer.
func (s *Source) Start(stop <-chan struct{}) {
	if s != nil {
		s.factory.Start(stop)
	}
}

// HasSynced reports whether the informer has synced (always, when off).
func (s *Source) HasSynced() bool { return s == nil || s.informer.HasSynced() }

// OnChange calls f on every pool added, changed (spec) or deleted.
func (s *Source) OnChange(f func()) {
	if s == nil {
		return
	}
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { f() },
		UpdateFunc: func(o, n any) {
			ou, ok1 := o.(*unstructured.Unstructured)
			nu, ok2 := n.(*unstructured.Unstructured)
			if !ok1 || !ok2 || ou.GetGeneration() != nu.GetGeneration() {
				f()
			}
		},
		DeleteFunc: func(any) { f() },
	})
}

// Pools lists the usable pools of namespace ("" = every watched one).
func (s *Source) Pools(namespace string) []Pool {
	if s == nil {
		return nil
	}
	var objs []any
	var err error
	if namespace == "" {
		objs, err = toAny(s.lister.List(labels.Everything()))
	} else {
		objs, err = toAny(s.lister.ByNamespace(namespace).List(labels.Everything()))
	}
	if err != nil {
		klog.ErrorS(err, "listing InferencePools")
		return nil
	}
	out := make([]Pool, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		p, err := FromUnstructured(u)
		if err != nil {
			if prev, loaded := s.bad.Swap(p.Key(), u.GetResourceVersion()); !loaded || prev != u.GetResourceVersion() {
				klog.ErrorS(err, "ignoring InferencePool")
			}
			continue
		}
		s.bad.Delete(p.Key())
		out = append(out, p)
	}
	return out
}

// Resolve matches the pools of namespace against podLabels; ok is false
// when discovery is off.
func (s *Source) Resolve(namespace string, podLabels map[string]string) (Resolution, bool) {
	if s == nil {
		return Resolution{}, false
	}
	return Match(s.Pools(namespace), namespace, podLabels), true
}

func toAny[T any](in []T, err error) ([]any, error) {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out, err
}
