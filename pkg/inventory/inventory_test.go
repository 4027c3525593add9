package inventory

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

func indexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, idx.Add(o))
	}
	return idx
}

func pod(name string, labels map[string]string, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Labels: labels}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func vaFor(name, kind, target string) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{ModelID: "m",
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{Kind: kind, Name: target}},
	}
}

func lwsLabels(name, workerIndex string) map[string]string {
	return map[string]string{llmdv1alpha1.LabelLWSName: name, llmdv1alpha1.LabelLWSWorkerIndex: workerIndex}
}

func TestResolve(t *testing.T) {
	l4 := map[string]string{"app": "l4"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "l4"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: l4},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "vllm", Command: []string{"vllm", "serve"}, Args: []string{"meta/llama", "--max-num-seqs=64", "--max-num-batched-tokens", "4096"}}}}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "h100"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "h100"}}}}
	now := metav1.NewTime(time.Now())
	lws := indexer(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": "prod", "name": "big"},
		"spec": map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{"size": int64(2),
			"workerTemplate": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "vllm", "args": []any{"--max-num-seqs=16"}}}}}}},
	}})
	inv := &Inventory{
		LeaderWorkerSets: cache.NewGenericLister(lws, llmdv1alpha1.LeaderWorkerSetResource.GroupResource()),
		VAs:              llmdlisters.NewVariantAutoscalingLister(indexer(t, vaFor("a", "Deployment", "l4"), vaFor("b", "StatefulSet", "h100"))),
		Deployments:      appslisters.NewDeploymentLister(indexer(t, deploy)),
		StatefulSets:     appslisters.NewStatefulSetLister(indexer(t, sts)),
		Pods: corelisters.NewPodLister(indexer(t,
			pod("l4-ready-1", l4, true), pod("l4-ready-0", l4, true),
			pod("l4-loading", l4, false),
			pod("l4-terminating", l4, true, func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
			pod("l4-failed", l4, false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			pod("other", map[string]string{"app": "other"}, true),
			pod("h100-0", map[string]string{"app": "h100"}, true),
			pod("big-0", lwsLabels("big", "0"), true), pod("big-0-1", lwsLabels("big", "1"), true),
			pod("big-1", lwsLabels("big", "0"), false), pod("big-1-1", lwsLabels("big", "1"), false),
		)),
	}
	cases := []struct {
		name string
		va   *llmdv1alpha1.VariantAutoscaling
		want func(t *testing.T, resolved bool, reason, msg string, spec int32, ready []string, pending int32)
	}{
		{"deployment: ready, pending, terminating and failed pods told apart", vaFor("a", "Deployment", "l4"),
			func(t *testing.T, resolved bool, _, _ string, spec int32, ready []string, pending int32) {
				assert.True(t, resolved)
				assert.Equal(t, int32(4), spec)
				assert.Equal(t, []string{"l4-ready-0", "l4-ready-1"}, ready)
				assert.Equal(t, int32(1), pending)
			}},
		{"deployment: engine args from the pod template", vaFor("a", "Deployment", "l4"),
			func(t *testing.T, resolved bool, _, _ string, _ int32, _ []string, _ int32) {
				got := inv.Resolve(vaFor("a", "Deployment", "l4"))
				assert.Equal(t, [2]int64{64, 4096}, [2]int64{got.MaxNumSeqs, got.MaxNumBatchedTokens})
			}},
		{"statefulset without replicas defaults to 1", vaFor("b", "StatefulSet", "h100"),
			func(t *testing.T, resolved bool, _, _ string, spec int32, ready []string, _ int32) {
				assert.True(t, resolved)
				assert.Equal(t, int32(1), spec)
				assert.Equal(t, []string{"h100-0"}, ready)
			}},
		// What makes a target unresolvable is ResolveTarget's table; the
		// reason and message reach the engine unchanged.
		{"missing target", vaFor("c", "Deployment", "nope"),
			func(t *testing.T, resolved bool, reason, msg string, _ int32, _ []string, _ int32) {
				assert.False(t, resolved)
				assert.Equal(t, llmdv1alpha1.ReasonTargetNotFound, reason)
				assert.Equal(t, "Deployment prod/nope not found", msg)
			}},
		{"LWS: the Ready leaders are the replicas, workers are not counted", vaFor("d", "LeaderWorkerSet", "big"),
			func(t *testing.T, resolved bool, _, _ string, spec int32, ready []string, pending int32) {
				assert.True(t, resolved)
				assert.Equal(t, int32(2), spec)
				assert.Equal(t, []string{"big-0"}, ready)
				assert.Equal(t, int32(1), pending, "big-1, a leader not Ready yet")
				got := inv.Resolve(vaFor("d", "LeaderWorkerSet", "big"))
				assert.Equal(t, int64(16), got.MaxNumSeqs, "from the leader's template")
				assert.True(t, got.PodSelector.Matches(labels.Set(lwsLabels("big", "1"))), "workers hold GPUs")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := inv.Resolve(tc.va)
			tc.want(t, got.Resolved, got.Reason, got.Message, got.SpecReplicas, got.ReadyPods, got.PendingPods)
		})
	}
	views, err := inv.Views()
	require.NoError(t, err)
	require.Len(t, views, 2)
	assert.Equal(t, "a", views[0].VA.Name)
}

func TestEngineArgs(t *testing.T) {
	tests := []struct {
		name       string
		containers []corev1.Container
		seqs, toks int64
	}{
		{"flag=value in args", []corev1.Container{{Args: []string{"--max-num-seqs=128", "--max-num-batched-tokens=16384"}}}, 128, 16384},
		{"flag value in command", []corev1.Container{{Command: []string{"vllm", "serve", "m", "--max-num-seqs", "32"}}}, 32, 0},
		{"inside a shell command line", []corev1.Container{{Command: []string{"/bin/sh", "-c"}, Args: []string{"exec vllm serve m --max-num-batched-tokens 2048 --max-num-seqs '16'"}}}, 16, 2048},
		{"sidecar first, server second", []corev1.Container{{Name: "proxy", Args: []string{"--port=8000"}}, {Name: "vllm", Args: []string{"--max-num-seqs=8"}}}, 8, 0},
		{"environment variable, zero, garbage and a missing value read 0", []corev1.Container{{Args: []string{
			"--max-num-seqs=$(SEQS)", "--max-num-batched-tokens=0", "--max-num-seqs", "lots", "--max-num-batched-tokens"}}}, 0, 0},
		{"similar flag names do not count", []corev1.Container{{Args: []string{"--max-num-seqs-per-lora=4", "--max-model-len=8192"}}}, 0, 0},
		{"nothing set", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seqs, toks := EngineArgs(&corev1.PodSpec{Containers: tt.containers})
			assert.Equal(t, tt.seqs, seqs, "max-num-seqs")
			assert.Equal(t, tt.toks, toks, "max-num-batched-tokens")
		})
	}
}

func TestStartupAllowance(t *testing.T) {
	probe := func(initial, period, failures int32) *corev1.Probe {
		return &corev1.Probe{InitialDelaySeconds: initial, PeriodSeconds: period, FailureThreshold: failures}
	}
	cases := []struct {
		name   string
		probes []*corev1.Probe
		want   time.Duration
	}{
		{"no startupProbe: unknown", []*corev1.Probe{nil}, 0},
		{"explicit probe", []*corev1.Probe{probe(30, 10, 60)}, 630 * time.Second},
		{"Kubernetes defaults: 3 x 10 s", []*corev1.Probe{probe(0, 0, 0)}, 30 * time.Second},
		{"longest container wins", []*corev1.Probe{probe(0, 5, 12), nil, probe(60, 10, 30)}, 360 * time.Second},
		// int32 x int32 seconds overflows a Duration: saturate, never wrap.
		{"huge failureThreshold x periodSeconds saturates", []*corev1.Probe{probe(0, math.MaxInt32, math.MaxInt32)}, math.MaxInt64},
		{"huge everything saturates", []*corev1.Probe{probe(math.MaxInt32, math.MaxInt32, math.MaxInt32)}, math.MaxInt64},
		{"huge initial delay fits", []*corev1.Probe{probe(math.MaxInt32, 1, 1)}, (math.MaxInt32 + 1) * time.Second},
		{"a huge probe beside a normal one", []*corev1.Probe{probe(0, 10, 3), probe(0, 1<<20, 1<<20)}, math.MaxInt64},
	}
	for _, tc := range cases {
		spec := &corev1.PodSpec{}
		for _, p := range tc.probes {
			spec.Containers = append(spec.Containers, corev1.Container{Name: "c", StartupProbe: p})
		}
		assert.Equal(t, tc.want, StartupAllowance(spec), tc.name)
	}
}

// startedPod is a Ready pod created at created whose Ready condition last
// turned True readyAfter later.
func startedPod(name string, created time.Time, readyAfter time.Duration, mutate ...func(*corev1.Pod)) *corev1.Pod {
	return pod(name, map[string]string{"app": "l4"}, true, append([]func(*corev1.Pod){func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(readyAfter))
	}}, mutate...)...)
}

func TestStartupDelay(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
	noTransition := func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.Time{} }
	cases := []struct {
		name string
		pods []*corev1.Pod
		want time.Duration
	}{
		{"no pods: unknown", nil, 0},
		{"one pod", []*corev1.Pod{startedPod("a", t0, 95*time.Second)}, 95 * time.Second},
		{"odd count: the median, not the mean", []*corev1.Pod{
			startedPod("a", t0, 60*time.Second), startedPod("b", t0, 20*time.Minute), startedPod("c", t0, 90*time.Second)}, 90 * time.Second},
		{"even count: mean of the middle two", []*corev1.Pod{
			startedPod("a", t0, 60*time.Second), startedPod("b", t0, 120*time.Second),
			startedPod("c", t0, 100*time.Second), startedPod("d", t0, 10*time.Minute)}, 110 * time.Second},
		{"Ready more than an hour after creation is a restart, skipped", []*corev1.Pod{
			startedPod("a", t0, 2*time.Minute), startedPod("old", t0.Add(-48*time.Hour), 47*time.Hour)}, 2 * time.Minute},
		{"only restarts: unknown", []*corev1.Pod{startedPod("old", t0, 61*time.Minute)}, 0},
		{"not Ready, no transition time, or Ready before creation: skipped", []*corev1.Pod{
			startedPod("loading", t0, 5*time.Minute, notReady), startedPod("bare", t0, 0, noTransition),
			startedPod("skewed", t0, -time.Second), startedPod("a", t0, 3*time.Minute)}, 3 * time.Minute},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, StartupDelay(tc.pods), tc.name)
	}
}

func TestResolveMeasuresStartupDelayOverReadyPods(t *testing.T) {
	l4 := map[string]string{"app": "l4"}
	t0 := time.Now().Add(-30 * time.Minute)
	deletedAt := metav1.NewTime(time.Now())
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "l4"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: l4}}}
	inv := &Inventory{
		Deployments: appslisters.NewDeploymentLister(indexer(t, deploy)),
		Pods: corelisters.NewPodLister(indexer(t,
			startedPod("l4-0", t0, 4*time.Minute), startedPod("l4-1", t0, 6*time.Minute),
			// A terminating pod is not counted, however it started.
			startedPod("l4-old", t0, 10*time.Second, func(p *corev1.Pod) { p.DeletionTimestamp = &deletedAt }),
			startedPod("l4-loading", t0, time.Second, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }),
		)),
	}
	got := inv.Resolve(vaFor("a", "Deployment", "l4"))
	require.True(t, got.Resolved)
	assert.Equal(t, []string{"l4-0", "l4-1"}, got.ReadyPods)
	assert.Equal(t, 5*time.Minute, got.StartupDelay)
	// Each Ready pod's Ready time, which every adapter replica reads alike.
	require.Len(t, got.ReadyAt, 2)
	assert.True(t, got.ReadyAt["l4-0"].Equal(t0.Add(4*time.Minute)), "l4-0 Ready at %s", got.ReadyAt["l4-0"])
	assert.True(t, got.ReadyAt["l4-1"].Equal(t0.Add(6*time.Minute)), "l4-1 Ready at %s", got.ReadyAt["l4-1"])
}
