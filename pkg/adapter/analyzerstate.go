package adapter

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/engine"
)

// AnalyzerStateConfigMapName is the wva-owned ConfigMap (in the config
// namespace) holding the analyzers' memory of each variant group, one data
// key per group (engine.EncodeState, at most engine.MaxStateBytes).
const AnalyzerStateConfigMapName = "wva-analyzer-state"

// StatePersister keeps AnalyzerStateConfigMapName equal to the engine's
// analyzer state, so a newly elected leader decides as the old one would
// have instead of starting the analyzers cold. Only the leader runs it, the
// way lastGoodPersister runs.
type StatePersister struct {
	Kube      kubernetes.Interface
	Namespace string
	Engine    *engine.Engine
	Lister    corelisters.ConfigMapLister
	// Interval is how often the state is checked and, when it changed,
	// written: at most one write per engine interval.
	Interval time.Duration
}

// Load restores the persisted state into the engine; call it before the
// new leader's first cycle. It reads the API server, not the informer
// cache, which may not have the old leader's last write yet. Without a
// ConfigMap the analyzers start afresh.
func (p *StatePersister) Load(ctx context.Context) error {
	cm, err := p.Kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, AnalyzerStateConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	state := engine.DecodeState(cm.Data)
	p.Engine.RestoreAnalyzerState(state)
	klog.InfoS("restored analyzer state", "configmap", klog.KObj(cm), "groups", len(state))
	return nil
}

// Run persists the state every Interval until ctx is done.
func (p *StatePersister) Run(ctx context.Context) {
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := p.Persist(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "persisting analyzer state", "configmap", klog.KRef(p.Namespace, AnalyzerStateConfigMapName))
		}
	}
}

// Persist writes the state when it differs from the cached ConfigMap.
func (p *StatePersister) Persist(ctx context.Context) error {
	data, dropped := engine.EncodeState(p.Engine.AnalyzerState())
	if dropped > 0 {
		klog.InfoS("analyzer state over the size bound; those groups start afresh on a new leader", "groups", dropped,
			"maxGroupBytes", engine.MaxGroupStateBytes, "maxBytes", engine.MaxStateBytes)
	}
	return syncConfigMap(ctx, p.Kube, p.Lister, p.Namespace, AnalyzerStateConfigMapName, data)
}
