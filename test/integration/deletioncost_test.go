package integration

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/deletioncost"
	"github.com/wva-project/wva/pkg/inventory"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestDeletionCostRemovesIdlePod: the costs the engine writes (as the
// adapter's ServiceAccount, under deploy/default's RBAC) make the real
// ReplicaSet controller delete the idle pod on a scale-down, round after
// round. The idle pod is never the one Ready for the shortest time, which
// the ReplicaSet would delete without the annotation.
func TestDeletionCostRemovesIdlePod(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster := harness.StartT(t, harness.Options{})
	cluster.StartControllerManagerT(t, harness.ControllerManagerOptions{
		Controllers: []string{"deployment-controller", "replicaset-controller", "serviceaccount-controller"}})
	admin := cluster.Clientset()
	createNamespace(ctx, t, admin, "wva-system")
	createNamespace(ctx, t, admin, "prod")
	applier, err := testenv.NewApplier(cluster.RESTConfig)
	require.NoError(t, err)
	for _, o := range testenv.RBACObjects(renderDefault(t)) {
		require.NoError(t, applier.Apply(ctx, o, false), objKey(o))
	}
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:wva-system:wva-adapter",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:wva-system", "system:authenticated"}}
	adapter, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// The adapter's pod cache, trimmed as in the adapter.
	factory := informers.NewSharedInformerFactoryWithOptions(adapter, 0, informers.WithNamespace("prod"))
	podInformer := factory.Core().V1().Pods()
	require.NoError(t, podInformer.Informer().SetTransform(inventory.PodTransform))
	lister := podInformer.Lister()
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	factory.WaitForCacheSync(ctx.Done())
	writer := deletioncost.Writer{Client: adapter, Pods: lister}

	sel := map[string]string{"app": "llama"}
	_, err = admin.AppsV1().Deployments("prod").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llama"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// There is no kubelet: the test turns the ReplicaSet's pods Ready, each
	// Ready since readyAgo before now (older pods earlier).
	readyAt := map[string]time.Time{}
	podsNow := func() []corev1.Pod {
		list, err := admin.CoreV1().Pods("prod").List(ctx, metav1.ListOptions{LabelSelector: labels.Set(sel).String()})
		require.NoError(t, err)
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out
	}
	makeReady := func(readyAgo time.Duration) {
		t.Helper()
		testenv.Eventually(ctx, t, "3 pods", func() (bool, string) {
			n := len(podsNow())
			return n == 3, fmt.Sprintf("%d pods", n)
		})
		for _, p := range podsNow() {
			if _, ok := readyAt[p.Name]; ok {
				continue
			}
			readyAt[p.Name] = time.Now().Add(-readyAgo).Truncate(time.Second)
			readyAgo /= 4 // pods created together still differ
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(readyAt[p.Name])}}
			_, err := admin.CoreV1().Pods("prod").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	scale := func(replicas int32) {
		_, err := admin.AppsV1().Deployments("prod").UpdateScale(ctx, "llama",
			&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llama"}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}},
			metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	makeReady(24 * time.Hour)
	const rounds = 4
	for round := range rounds {
		// Youngest (by Ready time) first: the ReplicaSet's own pick.
		names := make([]string, 0, 3)
		for _, p := range podsNow() {
			names = append(names, p.Name)
		}
		sort.Slice(names, func(i, j int) bool { return readyAt[names[i]].After(readyAt[names[j]]) })
		idle := names[1+round%2] // the middle one, then the oldest
		running := map[string]float64{}
		for i, n := range names {
			running[n] = float64(2 + 3*i)
		}
		running[idle] = 0
		costs := deletioncost.Costs(names, running)
		patched, err := writer.WriteCosts(ctx, "prod", costs)
		require.NoError(t, err, "round %d", round)
		assert.Positive(t, patched, "round %d", round)
		testenv.Eventually(ctx, t, "costs in the adapter's cache", func() (bool, string) {
			for n, c := range costs {
				p, err := lister.Pods("prod").Get(n)
				if err != nil || p.Annotations[deletioncost.Annotation] != fmt.Sprint(*c) {
					return false, fmt.Sprintf("%s: %v %v", n, p.GetAnnotations(), err)
				}
			}
			return true, ""
		})
		again, err := writer.WriteCosts(ctx, "prod", costs)
		require.NoError(t, err)
		assert.Zero(t, again, "round %d: unchanged costs are not patched again", round)

		scale(2)
		testenv.Eventually(ctx, t, "the ReplicaSet down to 2 pods", func() (bool, string) {
			n := len(podsNow())
			return n == 2, fmt.Sprintf("%d pods", n)
		})
		var left []string
		for _, p := range podsNow() {
			left = append(left, p.Name)
		}
		require.NotContains(t, left, idle, "round %d: running %v, the idle pod must go", round, running)
		t.Logf("round %d: running %v -> deleted %s, kept %s", round, running, idle, strings.Join(left, ", "))

		scale(3)
		time.Sleep(time.Until(readyAt[names[0]].Add(1100 * time.Millisecond))) // Ready times in whole seconds must differ
		makeReady(0)
	}
}

// TestRunningRequestsAgainstPrometheus runs the scale-down query against
// Debian's Prometheus: per pod, vLLM's and SGLang's gauges, in the
// namespaces asked for only.
func TestRunningRequestsAgainstPrometheus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	running := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: deletioncost.MetricRequestsRunning, Help: "Running requests."},
		[]string{"namespace", "pod", "model_name"})
	sglang := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: deletioncost.MetricSGLangRunning, Help: "Running requests."},
		[]string{"namespace", "pod", "model_name"})
	reg.MustRegister(running, sglang)
	sglang.WithLabelValues("prod", "sglang-0", "m").Set(4)
	running.WithLabelValues("prod", "llama-0", "m").Set(3)
	running.WithLabelValues("prod", "llama-1", "m").Set(0)
	running.WithLabelValues("staging", "llama-2", "m").Set(7)
	running.WithLabelValues("prod", "", "m").Set(5) // no pod label: skipped
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    honor_labels: true\n" +
		"    static_configs:\n      - targets: [\"" + strings.TrimPrefix(srv.URL, "http://") + "\"]\n"
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: cfg})
	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	src := deletioncost.Prometheus{API: promv1.NewAPI(client), Labels: collector.DefaultLabels()}

	var got map[collector.PodKey]float64
	testenv.Eventually(ctx, t, "the exporter scraped", func() (bool, string) {
		got, err = src.RequestsRunning(ctx, []string{"prod"}, time.Now())
		return err == nil && len(got) > 0, fmt.Sprint(got, err)
	})
	assert.Equal(t, map[collector.PodKey]float64{{Namespace: "prod", Pod: "llama-0"}: 3, {Namespace: "prod", Pod: "llama-1"}: 0, {Namespace: "prod", Pod: "sglang-0"}: 4}, got)
	byPod := map[string]float64{}
	for k, v := range got {
		byPod[k.Pod] = v
	}
	assert.Equal(t, map[string]*int32{"llama-0": ptr.To[int32](3), "llama-1": ptr.To[int32](0), "llama-9": nil},
		deletioncost.Costs([]string{"llama-0", "llama-1", "llama-9"}, byPod))
}
