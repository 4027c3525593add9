package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/wva-project/wva/pkg/adapter"
	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/engine"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/testenv"
)

// rampAnalyzer plans one more replica every cycle it remembers: its
// decision depends on nothing but its state, so a cold start shows.
type rampAnalyzer struct{}

type rampState struct {
	Cycles int32 `json:"cycles"`
}

func (rampAnalyzer) Name() string { return params.DefaultScaling().AnalyzerName }

func (r rampAnalyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	return r.AnalyzeState(g, cfg, nil)
}

func (rampAnalyzer) AnalyzeState(g decision.Group, _ params.Resolved, prev any) (analyzer.Result, error) {
	st, _ := analyzer.DecodeState[rampState](prev)
	planned := map[string]int32{}
	for _, v := range g.Variants {
		planned[v.Name] = 1 + st.Cycles
	}
	return analyzer.Result{Signal: decision.Signal{PlannedReplicas: planned, Reason: fmt.Sprintf("ramp after %d cycles", st.Cycles)},
		State: rampState{Cycles: st.Cycles + 1}}, nil
}

// apiViews lists the VA from the API server (so each engine sees the
// status the other wrote) with a resolved target of one Ready pod.
type apiViews struct {
	ctx context.Context
	wva versioned.Interface
}

func (v apiViews) Views() ([]decide.View, error) {
	va, err := v.wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(v.ctx, "llama-l4", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return []decide.View{{VA: va, Target: decide.Target{Resolved: true, SpecReplicas: 1, ReadyPods: []string{"p1"}}}}, nil
}

type fixedMetrics struct{}

func (fixedMetrics) Collect(context.Context, collector.Request) (collector.Result, error) {
	return collector.Result{Pods: map[collector.PodKey]collector.PodMetrics{
		{Namespace: "prod", Pod: "p1"}: {KvCacheUsage: 0.5, HasKvCacheUsage: true, HasQueueLength: true}}}, nil
}

// stateCluster starts a control plane with the VA prod/llama-l4 (up to
// maxReplicas) and a ConfigMap lister on wva-system, where the analyzer
// state is persisted.
func stateCluster(ctx context.Context, t *testing.T, maxReplicas int32) (kubernetes.Interface, versioned.Interface, corelisters.ConfigMapLister) {
	t.Helper()
	_, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama-3.1-8b", "5", 1, maxReplicas), metav1.CreateOptions{})
	require.NoError(t, err)
	cms := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("wva-system"))
	lister := cms.Core().V1().ConfigMaps().Lister()
	cms.Start(ctx.Done())
	cms.WaitForCacheSync(ctx.Done())
	return cs, wva, lister
}

// TestAnalyzerStateSurvivesLeaderChange: engine A decides a few cycles and
// persists its analyzers' state in wva-analyzer-state; a fresh engine B (a
// new leader, no memory of its own) loads it from the API server and its
// first decision, as served in VA status, is the one A would make next,
// not a cold start's.
func TestAnalyzerStateSurvivesLeaderChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, wva, lister := stateCluster(ctx, t, 10)

	newEngine := func() (*engine.Engine, *adapter.StatePersister) {
		p := decide.Default()
		// Under the name the built-in configuration selects.
		p.Analyzers = map[string]analyzer.Analyzer{rampAnalyzer{}.Name(): rampAnalyzer{}}
		e := &engine.Engine{Views: apiViews{ctx, wva}, Metrics: fixedMetrics{}, Status: engine.ClientStatusWriter{Client: wva},
			Config: config.NewStore(), Pipeline: p, Clock: clock.RealClock{}, Interval: time.Second, StatusHeartbeat: time.Minute}
		return e, &adapter.StatePersister{Kube: cs, Namespace: "wva-system", Engine: e, Lister: lister}
	}
	served := func() int32 {
		v, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
		require.NoError(t, err)
		return v.Status.DesiredOptimizedAlloc.NumReplicas
	}
	decided := func(c engine.Cycle) int32 {
		require.Len(t, c.Results, 1)
		require.Len(t, c.Results[0].Targets, 1)
		return c.Results[0].Targets[0].Replicas
	}

	a, pa := newEngine()
	require.NoError(t, pa.Load(ctx)) // no ConfigMap yet: cold
	for i := range 3 {
		c, err := a.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, int32(1+i), decided(c))
	}
	require.Equal(t, int32(3), served())
	require.NoError(t, pa.Persist(ctx))
	cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, adapter.AnalyzerStateConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, cm.Data, 1)
	rv := cm.ResourceVersion
	// Unchanged state: no write.
	testenv.Eventually(ctx, t, "the informer has the ConfigMap", func() (bool, string) {
		got, err := lister.ConfigMaps("wva-system").Get(adapter.AnalyzerStateConfigMapName)
		return err == nil && got.ResourceVersion == rv, fmt_(got, err)
	})
	require.NoError(t, pa.Persist(ctx))
	cm, err = cs.CoreV1().ConfigMaps("wva-system").Get(ctx, adapter.AnalyzerStateConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, rv, cm.ResourceVersion, "an unchanged state is not rewritten")

	// B takes over: loads, then decides.
	b, pb := newEngine()
	require.NoError(t, pb.Load(ctx))
	cb, err := b.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(4), decided(cb), "B continues A's ramp (a cold start decides 1)")
	assert.Equal(t, int32(4), served())

	// What A decides next from its own memory is the same.
	ca, err := a.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, decided(ca), decided(cb))
	assert.Equal(t, ca.Results[0].Targets[0].Rule, cb.Results[0].Targets[0].Rule)

	// A cold engine, for contrast, starts over.
	cold, _ := newEngine()
	cc, err := cold.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(1), decided(cc))
}

// TestAnalyzerStateSavedEachCycle: with the persister as the engine's
// SaveState, the ConfigMap holds each cycle's state as soon as the cycle
// has run (no separate tick to wait for, so a leader killed after writing
// its statuses leaves the state they came from), even when the persister's
// cache is behind the API server.
func TestAnalyzerStateSavedEachCycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama-3.1-8b", "5", 1, 10), metav1.CreateOptions{})
	require.NoError(t, err)
	// A cache that never catches up: it keeps the first copy it is given.
	stale := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p := decide.Default()
	p.Analyzers = map[string]analyzer.Analyzer{rampAnalyzer{}.Name(): rampAnalyzer{}}
	e := &engine.Engine{Views: apiViews{ctx, wva}, Metrics: fixedMetrics{}, Status: engine.ClientStatusWriter{Client: wva},
		Config: config.NewStore(), Pipeline: p, Clock: clock.RealClock{}, Interval: time.Second, StatusHeartbeat: time.Minute}
	persister := &adapter.StatePersister{Kube: cs, Namespace: "wva-system", Engine: e, Lister: corelisters.NewConfigMapLister(stale)}
	e.SaveState = persister.Save
	persisted := func() (*corev1.ConfigMap, int32) {
		cm, err := cs.CoreV1().ConfigMaps("wva-system").Get(ctx, adapter.AnalyzerStateConfigMapName, metav1.GetOptions{})
		require.NoError(t, err)
		state := engine.DecodeState(cm.Data)
		require.Len(t, state, 1)
		var st rampState
		for _, v := range state {
			st, _ = analyzer.DecodeState[rampState](v)
		}
		return cm, st.Cycles
	}
	for i := range 3 {
		_, err := e.RunOnce(ctx)
		require.NoError(t, err)
		cm, cycles := persisted()
		assert.Equal(t, int32(i+1), cycles, "the state after cycle %d", i+1)
		if i == 0 {
			require.NoError(t, stale.Add(cm))
		}
	}
}
