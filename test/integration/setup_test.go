// Package integration runs wva's components as processes against a real
// kube-apiserver (+ etcd) and Debian's Prometheus, from test/harness.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/harness"
)

// wvaBinary is built once by TestMain.
var wvaBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wva-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wvaBinary = filepath.Join(dir, "wva")
	build := exec.Command("go", "build", "-o", wvaBinary, "./cmd/wva")
	build.Dir = repoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building wva:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// installCRD applies the generated CRD and waits until it is established.
func installCRD(ctx context.Context, t *testing.T, c *harness.Cluster) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "crd", "llmd.ai_variantautoscalings.yaml"))
	require.NoError(t, err)
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &obj.Object))
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err = dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(ctx, t, "CRD established", func() (bool, string) {
		got, err := dyn.Resource(gvr).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, ""
			}
		}
		return false, fmt.Sprint(conds)
	})
	// Discovery of the new group can lag the condition.
	wva, err := versioned.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	eventually(ctx, t, "VA API served", func() (bool, string) {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("default").List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

func createNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// No controller-manager in some tests: create the default
	// ServiceAccount the ServiceAccount admission plugin wants for pods.
	_, err = cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
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

// adapterProcess is `wva adapter` running as a child process.
type adapterProcess struct {
	cmd        *exec.Cmd
	log        *syncBuffer
	MetricsURL string
	Port       int
	done       chan struct{}
}

// startAdapter runs the adapter with the same flags a Deployment would use,
// plus loopback addresses and a 1 s engine interval for test speed.
func startAdapter(ctx context.Context, t *testing.T, c *harness.Cluster, promURL string, servingCert, servingKey []byte, extra ...string) *adapterProcess {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, servingCert, 0o600))
	require.NoError(t, os.WriteFile(keyFile, servingKey, 0o600))
	a := &adapterProcess{Port: freePort(t), log: &syncBuffer{}, done: make(chan struct{})}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a.MetricsURL = "http://" + metricsAddr
	args := append([]string{"adapter",
		"--secure-port=" + fmt.Sprint(a.Port), "--bind-address=127.0.0.1",
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--lister-kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath, "--authorization-kubeconfig=" + c.KubeconfigPath,
		"--prometheus-url=" + promURL, "--engine-interval=1s", "--config-namespace=wva-system",
		"--leader-elect=false", "--metrics-bind-address=" + metricsAddr, "--v=2",
	}, extra...)
	a.cmd = exec.Command(wvaBinary, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	require.NoError(t, a.cmd.Start())
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("adapter log (tail):\n%s", tail(a.log.String(), 60))
		}
	})
	eventually(ctx, t, "adapter ready", func() (bool, string) {
		select {
		case <-a.done:
			return false, "adapter exited:\n" + tail(a.log.String(), 30)
		default:
		}
		resp, err := http.Get(a.MetricsURL + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return a
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Stop sends SIGTERM and waits.
func (a *adapterProcess) Stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
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

// eventually polls cond every 250ms until it holds or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: %s", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
