package harness_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

const testTimeout = 2 * time.Minute

// TestPinnedVersions checks that the versions in the harness, build.sh and
// test/tools/go.mod agree (a bump must touch all three).
func TestPinnedVersions(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	build, err := os.ReadFile(filepath.Join("..", "tools", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"k8s.io/kubernetes " + harness.KubernetesVersion,
		"go.etcd.io/etcd/server/v3 " + harness.EtcdVersion,
		"k8s.io/client-go => k8s.io/client-go v0." + strings.TrimPrefix(harness.KubernetesVersion, "v1."),
		"sigs.k8s.io/kwok " + harness.KwokVersion,
	} {
		if !strings.Contains(string(gomod), want) {
			t.Errorf("test/tools/go.mod lacks %q", want)
		}
	}
	for _, want := range []string{"K8S_VERSION=" + harness.KubernetesVersion, "ETCD_VERSION=" + harness.EtcdVersion, "KWOK_VERSION=" + harness.KwokVersion,
		"HELM_VERSION=" + harness.HelmVersion} {
		if !strings.Contains(string(build), want) {
			t.Errorf("test/tools/build.sh lacks %q", want)
		}
	}
}

// TestToolsShareWvasModuleVersions: a module whose packages both wva and
// the test binaries (test/tools) build must be at one version in both, or
// CI on a fresh machine compiles those packages twice.
func TestToolsShareWvasModuleVersions(t *testing.T) {
	versions := func(dir string, pkgs ...string) map[string]string {
		cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, pkgs...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if path, version, ok := strings.Cut(line, " "); ok && version != "" {
				m[path] = version
			}
		}
		return m
	}
	wva := versions(filepath.Join("..", ".."), "./...")
	tools := versions(filepath.Join("..", "tools"), "go.etcd.io/etcd/server/v3", "k8s.io/kubernetes/cmd/kube-apiserver",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler", "sigs.k8s.io/kwok/cmd/kwok")
	for path, v := range tools {
		if w, ok := wva[path]; ok && w != v {
			t.Errorf("%s: wva has %s, test/tools %s: `go get` the newer one in the module that is behind", path, w, v)
		}
	}
}

// TestFreePortBelowEphemeralRange: handed-out ports are outside the range
// the kernel takes outgoing connections' source ports from, distinct, and
// free.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low)
	}
	seen := map[int]bool{}
	for range 200 {
		port, err := harness.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= low || port < 1024 {
			t.Fatalf("port %d is not below the ephemeral range (from %d)", port, low)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		l.Close()
	}
}

func newNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.invalid/wva/app:test", // never pulled: there are no nodes
				}}},
			},
		},
	}
}

func TestClusterStartsAndServesAPI(t *testing.T) {
	c := harness.StartT(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := c.Clientset()

	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != harness.KubernetesVersion {
		t.Errorf("server version = %q, want %q", v.GitVersion, harness.KubernetesVersion)
	}

	newNamespace(ctx, t, cs, "wva-harness")
	if _, err := cs.AppsV1().Deployments("wva-harness").Create(ctx, deployment("wva-harness", "web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}

	// The kubeconfig file works on its own, as a person or a child process would use it.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cs2, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs2.AppsV1().Deployments("wva-harness").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment via kubeconfig: %v", err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 2 {
		t.Errorf("deployment replicas = %v, want 2", got.Spec.Replicas)
	}

	// RBAC is on: a user without bindings is forbidden.
	ucfg, err := c.UserConfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(ucfg).AppsV1().Deployments("wva-harness").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list as unbound user: err = %v, want forbidden", err)
	}

	// Stop really ends the processes and frees the port.
	c.Stop()
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("apiserver still answers after Stop")
	}
}

func TestControllerManagerRunsDeploymentAndHPAControllers(t *testing.T) {
	c := harness.StartT(t, harness.Options{})
	kcm := c.StartControllerManagerT(t, harness.ControllerManagerOptions{HPASyncPeriod: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := c.Clientset()
	const ns = "wva-kcm"
	newNamespace(ctx, t, cs, ns)

	d, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}

	// The deployment controller creates a ReplicaSet owned by the Deployment.
	testenv.Eventually(ctx, t, "ReplicaSet owned by deployment web", func() (bool, string) {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, rs := range rss.Items {
			for _, o := range rs.OwnerReferences {
				if o.UID == d.UID && o.Controller != nil && *o.Controller {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d replicasets, none owned", len(rss.Items))
	})

	// The HPA controller syncs an autoscaling/v2 HPA: with no external
	// metrics API registered it must report ScalingActive=False.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    5,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ExternalMetricSourceType,
				External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "wva_desired_replicas"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: resource.NewQuantity(1, resource.DecimalSI)},
				},
			}},
		},
	}
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create hpa: %v", err)
	}
	testenv.Eventually(ctx, t, "HPA status from the HPA controller", func() (bool, string) {
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range h.Status.Conditions {
			if cond.Type == autoscalingv2.ScalingActive && cond.Status == corev1.ConditionFalse {
				if !strings.Contains(cond.Reason, "FailedGetExternalMetric") {
					return false, fmt.Sprintf("ScalingActive reason %q", cond.Reason)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions: %+v", h.Status.Conditions)
	})
	if done, err := kcm.Exited(); done {
		t.Fatalf("kube-controller-manager exited: %v\n%s", err, kcm.LogTail())
	}
}

// TestAggregatedAPIService registers a fake extension apiserver on loopback
// and checks the aggregator proxies to it with the front-proxy client cert
// and X-Remote-* headers, as the wva external-metrics adapter will need.
func TestAggregatedAPIService(t *testing.T) {
	c := harness.StartT(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	opts := harness.APIServiceOptions{Group: "wva.test.io", Version: "v1", CABundle: c.CAPEM}
	certPEM, keyPEM, err := c.IssueServingCert([]string{opts.ServiceDNSName()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	frontProxyCAs := x509.NewCertPool()
	frontProxyCAs.AppendCertsFromPEM(c.FrontProxyCAPEM)

	type seen struct {
		cn, user string
		groups   []string
	}
	var (
		mu       sync.Mutex
		requests []seen
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/wva.test.io/v1":
			json.NewEncoder(w).Encode(map[string]any{
				"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "wva.test.io/v1",
				"resources": []map[string]any{{"name": "widgets", "namespaced": true, "kind": "Widget", "verbs": []string{"get", "list"}}},
			})
		case "/apis/wva.test.io/v1/namespaces/default/widgets":
			mu.Lock()
			requests = append(requests, seen{r.TLS.PeerCertificates[0].Subject.CommonName, r.Header.Get("X-Remote-User"), r.Header.Values("X-Remote-Group")})
			mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"kind": "WidgetList", "apiVersion": "wva.test.io/v1", "metadata": map[string]any{}, "items": []any{}})
		default:
			http.NotFound(w, r)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: frontProxyCAs}
	srv.StartTLS()
	defer srv.Close()
	opts.Port = srv.Listener.Addr().(*net.TCPAddr).Port

	if err := c.RegisterAPIService(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAPIServiceAvailable(ctx, "v1.wva.test.io"); err != nil {
		t.Fatal(err)
	}
	body, err := c.Clientset().CoreV1().RESTClient().Get().AbsPath("/apis/wva.test.io/v1/namespaces/default/widgets").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET through aggregator: %v", err)
	}
	if !strings.Contains(string(body), "WidgetList") {
		t.Fatalf("unexpected body: %s", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) == 0 {
		t.Fatal("extension server saw no request")
	}
	r := requests[len(requests)-1]
	if r.cn != "front-proxy-client" || r.user != "wva-admin" || !contains(r.groups, "system:masters") {
		t.Errorf("proxied request: client cert CN %q, X-Remote-User %q, X-Remote-Group %v", r.cn, r.user, r.groups)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestSchedulerStarts(t *testing.T) {
	c := harness.StartT(t, harness.Options{})
	s := c.StartSchedulerT(t, harness.SchedulerOptions{})
	time.Sleep(time.Second)
	if done, err := s.Exited(); done {
		t.Fatalf("kube-scheduler exited: %v\n%s", err, s.LogTail())
	}
}

func TestPrometheusScrapesAndRestarts(t *testing.T) {
	var value atomic.Int64
	value.Store(42)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP wva_test_queue_length Test metric.\n# TYPE wva_test_queue_length gauge\nwva_test_queue_length{model=\"m1\"} %d\n", value.Load())
	}))
	defer target.Close()

	start := time.Now()
	p := harness.StartPrometheusT(t, harness.PrometheusOptions{
		Targets:        []string{strings.TrimPrefix(target.URL, "http://")},
		ScrapeInterval: time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	waitValue := func(want float64) {
		t.Helper()
		testenv.Eventually(ctx, t, fmt.Sprintf("wva_test_queue_length == %v", want), func() (bool, string) {
			res, err := p.Query(ctx, `wva_test_queue_length{model="m1",job="wva-test"}`)
			if err != nil {
				return false, err.Error()
			}
			if len(res) == 1 && res[0].Value == want {
				return true, ""
			}
			return false, fmt.Sprintf("%+v", res)
		})
	}
	waitValue(42)
	t.Logf("%v: scraped 42 from %s via %s", time.Since(start), target.URL, p.URL)

	// Fault injection: stop, see the outage, start again on the same URL.
	p.Stop()
	t.Logf("%v: prometheus stopped", time.Since(start))
	if p.Running() {
		t.Fatal("prometheus still running after Stop")
	}
	if _, err := p.Query(ctx, "up"); err == nil {
		t.Fatal("query succeeded while prometheus is stopped")
	}
	value.Store(7)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: prometheus restarted", time.Since(start))
	waitValue(7)
	t.Logf("%v: scraped 7 after restart", time.Since(start))

	// A crash (SIGKILL) and start again, then a config reload.
	p.Kill()
	if p.Running() {
		t.Fatal("prometheus still running after Kill")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(target.URL, "http://")
	if err := p.Reload(ctx, harness.PrometheusConfig("wva-test-2", "/metrics", time.Second, []string{addr})); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(ctx, t, "samples of the reloaded job", func() (bool, string) {
		res, err := p.Query(ctx, `wva_test_queue_length{job="wva-test-2"}`)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == 1 && res[0].Value == 7, fmt.Sprintf("%+v", res)
	})
	t.Logf("%v: reloaded config scraped after kill+start", time.Since(start))
}

// A process that fails to start produces an error carrying its log tail.
func TestStartFailureReportsLogTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	begin := time.Now()
	c, err := harness.Start(ctx, harness.Options{Dir: t.TempDir(), APIServerArgs: []string{"--no-such-flag=1"}})
	if err == nil {
		c.Stop()
		t.Fatal("Start succeeded with a bad apiserver flag")
	}
	for _, want := range []string{"kube-apiserver", "exited", "unknown flag: --no-such-flag", "kube-apiserver.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if d := time.Since(begin); d > time.Minute {
		t.Errorf("failure took %v; it should be reported as soon as the process exits", d)
	}
}

// Missing binaries with building disabled give instructions, not a skip.
func TestMissingBinariesMessage(t *testing.T) {
	t.Setenv(harness.EnvBinDir, "")
	t.Setenv(harness.EnvBinCache, t.TempDir())
	t.Setenv(harness.EnvNoBuild, "1")
	_, err := harness.EnsureBinaries(context.Background())
	if err == nil || !strings.Contains(err.Error(), "test/tools/build.sh") || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("err = %v, want a message naming the missing binaries and build.sh", err)
	}

	t.Setenv(harness.EnvBinDir, t.TempDir())
	_, err = harness.EnsureBinaries(context.Background())
	if err == nil || !strings.Contains(err.Error(), harness.EnvBinDir) {
		t.Fatalf("err = %v, want a message naming %s", err, harness.EnvBinDir)
	}
}
