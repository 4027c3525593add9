package adapter

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/engine"
)

// AnalyzerStateConfigMapName is the wva-owned ConfigMap (in the config
// namespace) holding the analyzers' memory of each variant group, one data
// key per group (engine.EncodeState, at most engine.MaxStateBytes).
const AnalyzerStateConfigMapName = "wva-analyzer-state"

// StatePersister keeps AnalyzerStateConfigMapName equal to the engine's
// analyzer state, so a newly elected leader decides as the old one would
// have instead of starting the analyzers cold. The engine saves through it
// (Save as engine.Engine.SaveState) each cycle before writing statuses, so
// the state is never older than the decisions a killed leader published.
// Only the leader runs the engine, the way lastGoodPersister runs.
type StatePersister struct {
	Kube      kubernetes.Interface
	Namespace string
	Engine    *engine.Engine
	Lister    corelisters.ConfigMapLister
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

// Persist writes the engine's current state when it differs from the
// cached ConfigMap.
func (p *StatePersister) Persist(ctx context.Context) error {
	return p.Save(ctx, p.Engine.AnalyzerState())
}

// Save writes state when it differs from the cached ConfigMap (at most one
// write per cycle: the planner's state changes every cycle).
func (p *StatePersister) Save(ctx context.Context, state map[decide.GroupKey]any) error {
	data, dropped := engine.EncodeState(state)
	if dropped > 0 {
		klog.InfoS("analyzer state over the size bound; those groups start afresh on a new leader", "groups", dropped,
			"maxGroupBytes", engine.MaxGroupStateBytes, "maxBytes", engine.MaxStateBytes)
	}
	err := syncConfigMap(ctx, p.Kube, p.Lister, p.Namespace, AnalyzerStateConfigMapName, data)
	if apierrors.IsConflict(err) {
		// The cache is behind this leader's own write of a moment ago (a
		// triggered cycle): this cycle's state is written from the API
		// server's copy, not left for the next cycle.
		cur, getErr := p.Kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, AnalyzerStateConfigMapName, metav1.GetOptions{})
		if err = getErr; err == nil {
			err = writeConfigMap(ctx, p.Kube, cur, p.Namespace, AnalyzerStateConfigMapName, data)
		}
	}
	if err != nil {
		return fmt.Errorf("persisting analyzer state in ConfigMap %s/%s: %w", p.Namespace, AnalyzerStateConfigMapName, err)
	}
	return nil
}
