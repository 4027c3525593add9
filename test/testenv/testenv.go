// Package testenv holds helpers shared by tests that run wva's processes
// against the real control plane of test/harness.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/harness"
)

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildWVA builds the wva binary into dir and returns its path.
func BuildWVA(dir string) (string, error) {
	bin := filepath.Join(dir, "wva")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/wva")
	cmd.Dir = RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building wva: %w", err)
	}
	return bin, nil
}

// FreePort returns a free loopback port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Eventually polls cond every 250ms until it holds; if ctx ends first the
// test fails with cond's last detail. The one wait helper of test/.
func Eventually(ctx context.Context, t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, detail := cond()
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s: %s", what, last)
	}
}

// InstallCRD applies the generated VariantAutoscaling CRD and waits until
// it is served.
func InstallCRD(ctx context.Context, t testing.TB, c *harness.Cluster) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "crd", "llmd.ai_variantautoscalings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wva, err := versioned.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(ctx, t, "VA API served", func() (bool, string) {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("default").List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// CreateNamespace creates a namespace and its default ServiceAccount.
func CreateNamespace(ctx context.Context, t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// ExternalMetric is `kubectl get --raw` of wva_desired_replicas through the
// aggregation layer; it returns the single item's value.
func ExternalMetric(ctx context.Context, cs kubernetes.Interface, ns, variant string) (int64, error) {
	body, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/external.metrics.k8s.io/v1beta1/namespaces", ns, "wva_desired_replicas").
		Param("labelSelector", "variant_name="+variant).DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var list v1beta1.ExternalMetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", body, err)
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("want 1 item, got %d", len(list.Items))
	}
	return list.Items[0].Value.Value(), nil
}

// Process is a wva subcommand running as a child process.
type Process struct {
	Name string
	// MetricsURL serves /metrics in plain HTTP on loopback
	// (--metrics-secure=false); HealthURL serves /healthz and /readyz.
	MetricsURL string
	HealthURL  string
	cmd        *exec.Cmd
	log        *SyncBuffer
	done       chan struct{}
}

// StartProcess runs `bin subcommand --metrics-secure=false
// --metrics-bind-address=<free> --health-probe-bind-address=<free> args...`
// (all on loopback; args[0] is the subcommand and a flag in args overrides
// these) and waits until /readyz answers ok.
func StartProcess(ctx context.Context, t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	return StartProcessWaiting(ctx, t, name, bin, "/readyz", args...)
}

// StartProcessWaiting is StartProcess waiting for readyPath (e.g. /healthz
// for an adapter leader that cannot reach Prometheus on purpose).
func StartProcessWaiting(ctx context.Context, t testing.TB, name, bin, readyPath string, args ...string) *Process {
	t.Helper()
	return startProcess(ctx, t, name, bin, readyPath, nil, args)
}

// StartProcessEnv is StartProcess with env ("KEY=value") added to the
// test's environment, e.g. GOMEMLIMIT as a Deployment sets it (t.Setenv
// would forbid running in parallel).
func StartProcessEnv(ctx context.Context, t testing.TB, name, bin string, env []string, args ...string) *Process {
	t.Helper()
	return startProcess(ctx, t, name, bin, "/readyz", env, args)
}

func startProcess(ctx context.Context, t testing.TB, name, bin, readyPath string, env, args []string) *Process {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p := &Process{Name: name, MetricsURL: "http://" + addr, HealthURL: "http://" + health, log: &SyncBuffer{}, done: make(chan struct{})}
	argv := []string{args[0], "--metrics-secure=false", "--metrics-bind-address=" + addr, "--health-probe-bind-address=" + health}
	p.cmd = exec.Command(bin, append(argv, args[1:]...)...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, Tail(p.log.String(), 80))
		}
	})
	Eventually(ctx, t, name+" ready", func() (bool, string) {
		select {
		case <-p.done:
			return false, name + " exited:\n" + Tail(p.log.String(), 30)
		default:
		}
		body, err := Get(ctx, p.HealthURL+readyPath)
		return err == nil && body == "ok", fmt.Sprint(body, err)
	})
	return p
}

// Log is the process's output so far.
func (p *Process) Log() string { return p.log.String() }

// Stop sends SIGINT and waits (SIGKILL after 10 s).
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// PeakRSS is the process's peak resident memory so far (VmHWM in
// /proc/<pid>/status, Linux), in bytes.
func (p *Process) PeakRSS() (int64, error) { return p.MemStatus("VmHWM") }

// MemStatus is one memory field of /proc/<pid>/status (Linux), e.g.
// RssAnon or RssFile, in bytes.
func (p *Process) MemStatus(field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Get fetches a URL's body.
func Get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SyncBuffer collects a child's output while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
