package adapter

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/inventory"
)

// OptInDecisionsConfigMapName is the wva-owned ConfigMap (in the config
// namespace) holding the decisions of variants opted in by annotations
// (inventory.Memory.Persisted, one data key per variant). They have no VA
// status: the leader writes them here, so every replica serves them and a
// new leader serves the last ones until it decides.
const OptInDecisionsConfigMapName = "wva-optin-decisions"

// optInDecisions shares the leader's opted-in decisions through
// OptInDecisionsConfigMapName: the leader persists its Memory, the other
// replicas restore theirs from the ConfigMap their informer reads.
type optInDecisions struct {
	configMapPersister
	memory  *inventory.Memory
	leading func() bool
}

// persisted is the persister's data: Memory's decisions, logging those
// left out for size.
func (o *optInDecisions) persisted() map[string]string {
	data, dropped := o.memory.Persisted()
	if dropped > 0 {
		klog.InfoS("opted-in decisions over the size bound; other replicas answer NotFound for them", "variants", dropped,
			"maxBytes", inventory.MaxDecisionsBytes)
	}
	return data
}

// apply serves the ConfigMap's decisions on a follower (nil data: none).
// The leader's own Memory is ahead of the ConfigMap it wrote.
func (o *optInDecisions) apply(data map[string]string) {
	if !o.leading() {
		o.memory.Restore(data)
	}
}

// load restores the previous leader's decisions before the new leader's
// first cycle, from the API server (the informer may not have its last
// write yet). The first inventory pass keeps them for the variants still
// opted in, so they are served until the engine decides.
func (o *optInDecisions) load(ctx context.Context) error {
	cm, err := o.kube.CoreV1().ConfigMaps(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	o.memory.Restore(cm.Data)
	klog.InfoS("restored opted-in decisions", "configmap", klog.KObj(cm), "variants", len(cm.Data))
	return nil
}
