package inventory

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

var created = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// managed is what the API server adds to every object: field managers with
// their JSON field sets.
func managedFields(n int) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for i := range n {
		out = append(out, metav1.ManagedFieldsEntry{Manager: fmt.Sprintf("manager-%d", i), Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{` +
				`"k:{\"name\":\"vllm\"}":{".":{},"f:args":{},"f:command":{},"f:env":{".":{},"k:{\"name\":\"HF_TOKEN\"}":{".":{},"f:name":{},"f:valueFrom":{}}},` +
				`"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{"f:limits":{"f:nvidia.com/gpu":{}}},` +
				`"f:startupProbe":{},"f:volumeMounts":{}}},"f:nodeSelector":{},"f:volumes":{}},"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:podIP":{}}}`)}})
	}
	return out
}

// realisticPod is a vLLM pod as the API server returns it: managed fields,
// annotations, a long engine command line, env, volumes, probes, a sidecar
// and an init container, and a full status.
func realisticPod(ns, name string, labels map[string]string, ready bool) *corev1.Pod {
	env := []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}}
	for i := range 20 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("VLLM_SETTING_%02d", i), Value: strings.Repeat("v", 24)})
	}
	mounts := []corev1.VolumeMount{{Name: "model-cache", MountPath: "/models"}, {Name: "shm", MountPath: "/dev/shm"},
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstrPort}},
		PeriodSeconds: 10, FailureThreshold: 60}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	var conds []corev1.PodCondition
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		conds = append(conds, corev1.PodCondition{Type: c, Status: status, LastTransitionTime: metav1.NewTime(created.Add(3 * time.Minute))})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("0b7f6f6e-8f7e-4c2a-9d55-" + fmt.Sprintf("%012d", len(name))),
			ResourceVersion: "123456789", CreationTimestamp: created, Labels: labels, GenerateName: name[:len(name)-5],
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": created.String(), "prometheus.io/scrape": "true",
				"prometheus.io/port": "8000", "sidecar.istio.io/status": strings.Repeat(`{"initContainers":["istio-init"]}`, 8)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name[:len(name)-6], UID: "rs-uid", Controller: ptr.To(true)}},
			ManagedFields:   managedFields(4)},
		Spec: corev1.PodSpec{
			NodeName: "gpu-node-0042", NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}, ServiceAccountName: "vllm",
			InitContainers: []corev1.Container{{Name: "model-download", Image: "ghcr.io/example/downloader:v1.2.3", Args: []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--dest", "/models"},
				Env: env[:5], VolumeMounts: mounts}},
			Containers: []corev1.Container{
				{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0", Command: []string{"vllm", "serve"},
					Args: []string{"meta-llama/Llama-3.1-8B-Instruct", "--port=8000", "--max-num-seqs=64", "--max-num-batched-tokens=8192",
						"--gpu-memory-utilization=0.92", "--max-model-len=16384", "--enable-prefix-caching", "--kv-cache-dtype=fp8",
						"--disable-log-requests", "--served-model-name=llama-8b", "--tensor-parallel-size=1", "--download-dir=/models"},
					Env: env, VolumeMounts: mounts, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("48Gi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("48Gi")}},
					StartupProbe: probe, ReadinessProbe: probe, LivenessProbe: probe},
				{Name: "routing-sidecar", Image: "ghcr.io/llm-d/routing-sidecar:v0.2.0", Args: []string{"--port=8000", "--vllm-port=8200", "--connector=nixlv2"},
					Env: env[:3], VolumeMounts: mounts[2:]},
			},
			Volumes: []corev1.Volume{{Name: "model-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}}}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds, HostIP: "10.0.4.17", PodIP: "10.244.3.21",
			PodIPs: []corev1.PodIP{{IP: "10.244.3.21"}}, StartTime: &created, QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "vllm", Ready: ready, Image: "docker.io/vllm/vllm-openai:v0.11.0", ImageID: "docker.io/vllm/vllm-openai@sha256:" + strings.Repeat("ab", 32),
					ContainerID: "containerd://" + strings.Repeat("cd", 32), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
				{Name: "routing-sidecar", Ready: true, Image: "ghcr.io/llm-d/routing-sidecar:v0.2.0", ImageID: "ghcr.io/llm-d/routing-sidecar@sha256:" + strings.Repeat("ef", 32),
					ContainerID: "containerd://" + strings.Repeat("12", 32), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}}},
	}
}

var intstrPort = intstr.FromInt32(8000)

func realisticDeployment(name string, labels map[string]string, replicas int32, args []string, probe *corev1.Probe) *appsv1.Deployment {
	p := realisticPod("prod", name+"-xxxxx-yyyyy", labels, true)
	p.Spec.Containers[0].Args, p.Spec.Containers[0].StartupProbe = args, probe
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: "d-" + types.UID(name), Generation: 7,
		ResourceVersion: "42", Annotations: map[string]string{"deployment.kubernetes.io/revision": "3"}, ManagedFields: managedFields(3)},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: p.Spec}},
		Status: appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: replicas, ObservedGeneration: 7}}
}

// TestTransformsKeepWhatTheInventoryReads: the inventory resolves the same
// targets from trimmed caches as from untrimmed ones, over pods in every
// state it tells apart and templates with every field it reads.
func TestTransformsKeepWhatTheInventoryReads(t *testing.T) {
	l4, h100, other := map[string]string{"app": "l4", llmdv1alpha1.LabelRole: "decode"}, map[string]string{"app": "h100"}, map[string]string{"app": "other"}
	deleting := metav1.NewTime(created.Add(time.Hour))
	pods := []*corev1.Pod{realisticPod("prod", "l4-aaaaa-00001", l4, true), realisticPod("prod", "l4-aaaaa-00002", l4, true),
		realisticPod("prod", "l4-aaaaa-00003", l4, false), realisticPod("prod", "h100-0-xxxx", h100, true),
		realisticPod("prod", "other-0-xxxx", other, true), realisticPod("test", "l4-aaaaa-00009", l4, true)}
	gone := realisticPod("prod", "l4-aaaaa-00004", l4, true)
	gone.DeletionTimestamp = &deleting
	failed := realisticPod("prod", "l4-aaaaa-00005", l4, false)
	failed.Status.Phase = corev1.PodFailed
	lateReady := realisticPod("prod", "l4-aaaaa-00006", l4, true) // a flap, not a start-up
	for i := range lateReady.Status.Conditions {
		lateReady.Status.Conditions[i].LastTransitionTime = metav1.NewTime(created.Add(5 * time.Hour))
	}
	noReadyCondition := realisticPod("prod", "l4-aaaaa-00007", l4, false)
	noReadyCondition.Status.Conditions = noReadyCondition.Status.Conditions[:3]
	pods = append(pods, gone, failed, lateReady, noReadyCondition)

	deploys := []*appsv1.Deployment{
		realisticDeployment("l4", l4, 4, []string{"meta/llama", "--max-num-seqs", "64", "--max-num-batched-tokens=4096"},
			&corev1.Probe{InitialDelaySeconds: 30, PeriodSeconds: 5, FailureThreshold: 120}),
		realisticDeployment("other", other, 1, nil, nil),
	}
	deploys[1].Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "vllm serve m --max-num-seqs 32"}
	deploys[1].Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "h100", ManagedFields: managedFields(2)},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"h100"}}}},
			Template: deploys[0].Spec.Template}, Status: appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1, CurrentRevision: "h100-5d8f"}}
	vas := []*llmdv1alpha1.VariantAutoscaling{vaFor("a", "Deployment", "l4"), vaFor("b", "StatefulSet", "h100"),
		vaFor("c", "Deployment", "other"), vaFor("d", "Deployment", "missing")}

	build := func(t *testing.T, trim bool) *Inventory {
		add := func(idx cache.Indexer, obj any, transform cache.TransformFunc) {
			if trim {
				var err error
				obj, err = transform(obj)
				require.NoError(t, err)
			}
			require.NoError(t, idx.Add(obj))
		}
		podIdx, deployIdx, stsIdx := indexer(t), indexer(t), indexer(t)
		for _, p := range pods {
			add(podIdx, p.DeepCopy(), PodTransform)
		}
		for _, d := range deploys {
			add(deployIdx, d.DeepCopy(), DeploymentTransform)
		}
		add(stsIdx, sts.DeepCopy(), StatefulSetTransform)
		var vaObjs []any
		for _, v := range vas {
			vaObjs = append(vaObjs, v)
		}
		return &Inventory{VAs: llmdlisters.NewVariantAutoscalingLister(indexer(t, vaObjs...)),
			Deployments: appslisters.NewDeploymentLister(deployIdx), StatefulSets: appslisters.NewStatefulSetLister(stsIdx),
			Pods: corelisters.NewPodLister(podIdx)}
	}
	want, err := build(t, false).Views()
	require.NoError(t, err)
	got, err := build(t, true).Views()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	// ResolveTarget (also the fast path's) reads the same replicas,
	// ready replicas, version and selectors; the templates are compared
	// through the views above.
	full, trim := build(t, false), build(t, true)
	for _, va := range vas {
		w, werr := ResolveTarget(full.Targets(), va)
		g, gerr := ResolveTarget(trim.Targets(), va)
		assert.Equal(t, werr, gerr, va.Name)
		w.Template, g.Template = corev1.PodSpec{}, corev1.PodSpec{}
		assert.Equal(t, w, g, va.Name)
	}
	wantA, err := ResolveTarget(full.Targets(), vas[0])
	require.NoError(t, err)
	assert.Equal(t, [3]any{int32(4), int32(4), "42"}, [3]any{wantA.Replicas, wantA.ReadyReplicas, wantA.ResourceVersion})

	// The fixture exercises what the inventory reads, so the comparison
	// above means something.
	a := want[0].Target
	assert.Equal(t, []string{"l4-aaaaa-00001", "l4-aaaaa-00002", "l4-aaaaa-00006"}, a.ReadyPods)
	assert.Equal(t, int32(2), a.PendingPods)
	assert.Equal(t, 3*time.Minute, a.StartupDelay)
	assert.Equal(t, [2]int64{64, 4096}, [2]int64{a.MaxNumSeqs, a.MaxNumBatchedTokens})
	assert.Equal(t, 630*time.Second, a.StartupAllowance)
	assert.Equal(t, map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}, a.NodeSelector)
	assert.Equal(t, decision.RoleDecode, a.Role)
	assert.Equal(t, []string{"h100-0-xxxx"}, want[1].Target.ReadyPods)
	assert.Equal(t, int64(32), want[2].Target.MaxNumSeqs)
	assert.False(t, want[3].Target.Resolved)

	// And it trims.
	trimmed, err := PodTransform(pods[0])
	require.NoError(t, err)
	tp := trimmed.(*corev1.Pod)
	assert.Empty(t, tp.ManagedFields)
	assert.Empty(t, tp.Annotations)
	assert.Empty(t, tp.Spec.Containers)
	assert.Len(t, tp.Status.Conditions, 1)
	again, err := PodTransform(tp)
	require.NoError(t, err)
	assert.Equal(t, tp, again, "idempotent: a relist may transform a cached object again")

	// Of the annotations only the deletion cost stays: the engine's
	// writer compares with it so as not to patch an unchanged cost.
	costed := pods[0].DeepCopy()
	costed.Annotations[corev1.PodDeletionCost] = "7"
	trimmed, err = PodTransform(costed)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{corev1.PodDeletionCost: "7"}, trimmed.(*corev1.Pod).Annotations)
	again, err = PodTransform(trimmed)
	require.NoError(t, err)
	assert.Equal(t, trimmed, again)
}

// BenchmarkPodCacheMemory measures the heap an informer-like store of
// 10,000 realistic pods holds, untrimmed and trimmed by PodTransform. Each
// pod is decoded from JSON, as the informer does, so no strings are shared.
//
//	go test -run XXX -bench PodCacheMemory -benchtime 1x ./pkg/inventory
func BenchmarkPodCacheMemory(b *testing.B) {
	const n = 10000
	raw, err := json.Marshal(realisticPod("prod", "llama-8b-l4-7d9f8c6b5-abcde", map[string]string{"app": "llama-8b-l4",
		"pod-template-hash": "7d9f8c6b5", "llm-d.ai/model": "llama-8b", "llm-d.ai/role": "decode", "app.kubernetes.io/part-of": "llm-d"}, true))
	require.NoError(b, err)
	for _, tc := range []struct {
		name      string
		transform cache.TransformFunc
	}{{"untrimmed", nil}, {"trimmed", PodTransform}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				before := heap()
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
				for i := range n {
					p := &corev1.Pod{}
					require.NoError(b, json.Unmarshal(raw, p))
					p.Name = fmt.Sprintf("llama-8b-l4-7d9f8c6b5-%05d", i)
					var obj any = p
					if tc.transform != nil {
						obj, err = tc.transform(obj)
						require.NoError(b, err)
					}
					require.NoError(b, store.Add(obj))
				}
				held := heap() - before
				require.Len(b, store.List(), n) // keeps the store alive past the measurement
				b.ReportMetric(float64(held)/(1<<20), "MiB")
				b.ReportMetric(float64(held)/n, "bytes/pod")
				b.ReportMetric(float64(len(raw)), "json-bytes/pod")
			}
		})
	}
}

func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
