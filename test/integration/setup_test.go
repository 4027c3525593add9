// Package integration runs wva's components as processes against a real
// kube-apiserver (+ etcd) and Debian's Prometheus, from test/harness.
//
// Each test starts its own control plane, so the tests run in parallel
// (t.Parallel; most of their time is spent waiting on controllers and
// scrapes). The two that measure wake-up latency and resident memory run
// alone, before the parallel ones.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// wvaBinary is built once by TestMain.
var wvaBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wva-bin-")
	if err == nil {
		wvaBinary, err = testenv.BuildWVA(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() string { return testenv.RepoRoot() }

func freePort(t *testing.T) int { return testenv.FreePort(t) }

// installCRD applies the generated CRD and waits until it is established.
func installCRD(ctx context.Context, t *testing.T, c *harness.Cluster) { testenv.InstallCRD(ctx, t, c) }

// startCluster starts the control plane with the CRD installed and the
// given namespaces, and returns the clients most tests need.
func startCluster(ctx context.Context, t *testing.T, namespaces ...string) (*harness.Cluster, kubernetes.Interface, versioned.Interface) {
	t.Helper()
	cluster := harness.StartT(t, harness.Options{})
	wva, err := versioned.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	installCRD(ctx, t, cluster)
	for _, ns := range namespaces {
		createNamespace(ctx, t, cluster.Clientset(), ns)
	}
	return cluster, cluster.Clientset(), wva
}

func createNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	testenv.CreateNamespace(ctx, t, cs, name)
}

// servingVariant creates a Deployment and `ready` Ready pods for it (there
// is no kubelet: the test sets pod status itself).
func servingVariant(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32, ready []string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai"}}},
			},
		},
	}
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, pod := range ready {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai"}}},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Status.Phase = corev1.PodRunning
		created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func newVA(ns, name, model, cost string, min, max int32) *llmdv1alpha1.VariantAutoscaling {
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			ModelID:        model, MinReplicas: ptr.To(min), MaxReplicas: max, VariantCost: cost,
		},
	}
}

// adapterProcess is a wva process, with the adapter's secure port.
type adapterProcess struct {
	*testenv.Process
	Port int
	// CertDir is the serving certificate's directory, laid out like a
	// Secret volume (testenv.WriteSecretVolume) so tests can renew it.
	CertDir string
}

// startAdapterAPIService starts the adapter with a serving certificate for
// its Service and registers it as the external metrics APIService,
// returning once the aggregator reports it available.
func startAdapterAPIService(ctx context.Context, t *testing.T, c *harness.Cluster, promURL string, extra ...string) (*adapterProcess, harness.APIServiceOptions) {
	t.Helper()
	svc := harness.APIServiceOptions{Group: "external.metrics.k8s.io", Version: "v1beta1", Namespace: "wva-system", ServiceName: "wva-adapter"}
	cert, key := adapterServingCert(t, c)
	adapter := startAdapter(ctx, t, c, promURL, cert, key, extra...)
	svc.Port, svc.CABundle = adapter.Port, c.CAPEM
	require.NoError(t, c.RegisterAPIService(ctx, svc))
	require.NoError(t, c.WaitAPIServiceAvailable(ctx, "v1beta1.external.metrics.k8s.io"))
	return adapter, svc
}

// startAdapter runs the adapter with the same flags a Deployment would use,
// plus loopback addresses and a 1 s engine interval for test speed.
func startAdapter(ctx context.Context, t *testing.T, c *harness.Cluster, promURL string, servingCert, servingKey []byte, extra ...string) *adapterProcess {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, testenv.WriteSecretVolume(dir, map[string][]byte{"tls.crt": servingCert, "tls.key": servingKey}))
	port := freePort(t)
	args := append([]string{"adapter",
		"--secure-port=" + fmt.Sprint(port), "--bind-address=127.0.0.1",
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--lister-kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath, "--authorization-kubeconfig=" + c.KubeconfigPath,
		"--prometheus-url=" + promURL, "--engine-interval=1s", "--config-namespace=wva-system",
		"--leader-elect=false", "--v=2",
	}, extra...)
	p := testenv.StartProcessWaiting(ctx, t, "adapter", wvaBinary, "/healthz", args...)
	return &adapterProcess{Process: p, Port: port, CertDir: dir}
}

// getRaw is `kubectl get --raw` of the external metric through the
// aggregation layer.
func getRaw(ctx context.Context, cs kubernetes.Interface, ns, variant string) (*v1beta1.ExternalMetricValueList, error) {
	body, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/external.metrics.k8s.io/v1beta1/namespaces", ns, "wva_desired_replicas").
		Param("labelSelector", "variant_name="+variant).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var list v1beta1.ExternalMetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", body, err)
	}
	return &list, nil
}
