//go:build e2e

// Package e2e is the closed-loop rig: a real control plane (etcd,
// kube-apiserver, kube-controller-manager with the HPA controller,
// kube-scheduler), kwok for GPU nodes and pods that become Ready after a
// model-load delay, an emulated vLLM fleet and EPP scraped by Debian's
// Prometheus through file_sd, and wva's adapter, controller and
// scale-from-zero fast path as processes. Run with
// `make e2e`.
package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// Rig timings: fast enough for CI, in the same proportions as production
// (scrape << engine interval << model load).
const (
	scrapeInterval = "1s"
	engineInterval = 2 * time.Second
	podReadyDelay  = 8 * time.Second
	configNS       = "wva-system"
)

// rigOptions change the rig's timings and the controller's flags; the zero
// value is the CI-speed rig of TestClosedLoop.
type rigOptions struct {
	// EngineInterval is the adapter's --engine-interval (default engineInterval).
	EngineInterval time.Duration
	// HPASyncPeriod is the HPA controller's sync period (default 1 s).
	HPASyncPeriod time.Duration
	// PodReadyDelay is kwok's model-load time (default podReadyDelay).
	PodReadyDelay time.Duration
	// FeatureGates go to kube-apiserver and kube-controller-manager.
	FeatureGates map[string]bool
	// ControllerArgs are appended to `wva controller`'s flags.
	ControllerArgs []string
	// APIFaults, when set, sits between the adapter's client and
	// kube-apiserver (see realfaults_apierrors_test.go).
	APIFaults *apiFaultProxy
}

func (o rigOptions) withDefaults() rigOptions {
	if o.EngineInterval == 0 {
		o.EngineInterval = engineInterval
	}
	if o.HPASyncPeriod == 0 {
		o.HPASyncPeriod = time.Second
	}
	if o.PodReadyDelay == 0 {
		o.PodReadyDelay = podReadyDelay
	}
	return o
}

type rig struct {
	opts     rigOptions
	cluster  *harness.Cluster
	kube     kubernetes.Interface
	wva      versioned.Interface
	prom     *harness.Prometheus
	fleet    *fleet.Fleet
	bin      string
	certFile string
	keyFile  string
	adapter  *testenv.Process
	// adapterPort is where the APIService sends requests.
	adapterPort int
	// leaseIdentity is each adapter process's --leader-election-identity,
	// what the Lease's holderIdentity shows while it leads.
	leaseIdentity map[*testenv.Process]string
	// auditLog is the API server's audit log of the requests made as
	// ServiceAccounts of configNS, that is as wva's processes.
	auditLog   string
	controller *testenv.Process
	fastPath   *testenv.Process
	// kubeconfigs are per ServiceAccount of deploy/: the wva processes run
	// with their permissions, not as admin.
	kubeconfigs map[string]string
	// ksm serves kube-state-metrics' HPA series for the alert checks.
	ksm *httptest.Server
	// t is the whole test's T: processes started in a subtest with it
	// outlive that subtest.
	t      *testing.T
	svc    harness.APIServiceOptions
	report *report
}

func startRig(ctx context.Context, t *testing.T, variants []fleet.Variant) *rig {
	t.Helper()
	return startRigWith(ctx, t, rigOptions{}, variants)
}

func startRigWith(ctx context.Context, t *testing.T, opts rigOptions, variants []fleet.Variant) *rig {
	t.Helper()
	r := &rig{opts: opts.withDefaults(), report: &report{}, t: t, leaseIdentity: map[*testenv.Process]string{}}
	dir := t.TempDir()
	var err error
	if r.bin, err = testenv.BuildWVA(dir); err != nil {
		t.Fatal(err)
	}
	auditArgs, err := r.auditArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.cluster = harness.StartT(t, harness.Options{FeatureGates: r.opts.FeatureGates, APIServerArgs: auditArgs})
	r.kube = r.cluster.Clientset()
	if r.wva, err = versioned.NewForConfig(r.cluster.RESTConfig); err != nil {
		t.Fatal(err)
	}
	testenv.InstallCRD(ctx, t, r.cluster)
	// Per-controller ServiceAccounts, as in a real cluster: the HPA
	// controller reads wva_desired_replicas as
	// kube-system/horizontal-pod-autoscaler, which deploy/'s RBAC must allow.
	r.cluster.StartControllerManagerT(t, harness.ControllerManagerOptions{HPASyncPeriod: r.opts.HPASyncPeriod,
		FeatureGates: r.opts.FeatureGates, Args: []string{"--use-service-account-credentials=true"}})
	r.cluster.StartSchedulerT(t, harness.SchedulerOptions{})
	r.cluster.StartKwokT(t, harness.KwokOptions{PodReadyDelay: r.opts.PodReadyDelay})
	for i := range 4 {
		if err := r.cluster.CreateFakeNode(ctx, harness.FakeNode{Name: fmt.Sprintf("gpu-node-%d", i), GPUs: 8,
			Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.CreateNamespace(ctx, t, r.kube, configNS)
	r.installRBAC(ctx, t, dir)
	if r.opts.APIFaults != nil {
		r.opts.APIFaults.start(t, r.kubeconfigs["wva-adapter"], dir)
	}

	sd := filepath.Join(dir, "vllm-targets.json")
	fctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if r.fleet, err = fleet.Start(fctx, r.kube, sd, 250*time.Millisecond, variants...); err != nil {
		t.Fatal(err)
	}
	r.prom = harness.StartPrometheusT(t, harness.PrometheusOptions{Config: fleet.ScrapeConfig(sd, scrapeInterval)})

	r.svc = harness.APIServiceOptions{Group: "external.metrics.k8s.io", Version: "v1beta1", Namespace: configNS, ServiceName: "wva-adapter"}
	cert, key, err := r.cluster.IssueServingCert([]string{r.svc.ServiceDNSName()}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	r.certFile, r.keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(r.certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	r.adapterPort = port
	r.adapter = r.startAdapter(ctx, port)
	r.svc.Port, r.svc.CABundle = port, r.cluster.CAPEM
	if err := r.cluster.RegisterAPIService(ctx, r.svc); err != nil {
		t.Fatal(err)
	}
	if err := r.cluster.WaitAPIServiceAvailable(ctx, "v1beta1.external.metrics.k8s.io"); err != nil {
		t.Fatal(err)
	}
	r.controller = r.startController(ctx, "controller", r.opts.ControllerArgs...)
	// The fast path reads the emulated EPP directly (no pod network here,
	// so by URL rather than by EPP pod selector).
	r.fastPath = testenv.StartProcess(ctx, t, "scale-from-zero", r.bin, "scale-from-zero", "--kubeconfig="+r.kubeconfigs["wva-scale-from-zero"],
		"--leader-elect=false", "--config-namespace="+configNS, "--epp-url=http://"+r.fleet.Addr+"/epp/metrics")
	r.ksm = httptest.NewServer(http.HandlerFunc(r.serveHPAMetrics))
	t.Cleanup(r.ksm.Close)
	if err := r.prom.Reload(ctx, r.scrapeConfig(sd)); err != nil {
		t.Fatal(err)
	}
	return r
}

// auditPolicy records, at Metadata level (who, verb, object, response
// code), every request made as a ServiceAccount of configNS, which is how
// the rig runs wva's processes, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:` + configNS + `"]
- level: None
`

// auditArgs writes auditPolicy and returns kube-apiserver's flags for it.
func (r *rig) auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	r.auditLog = filepath.Join(dir, "audit.log")
	// The log backend's default mode is blocking: an event is in the file
	// before its response is sent.
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + r.auditLog, "--audit-log-format=json"}, nil
}

// installRBAC applies deploy/default's ServiceAccounts and RBAC (with
// deploy/scale-from-zero's) for real and writes a kubeconfig per
// ServiceAccount: a client certificate for the identity the ServiceAccount's
// token would give.
func (r *rig) installRBAC(ctx context.Context, t *testing.T, dir string) {
	objs, err := testenv.RenderKustomization(filepath.Join(testenv.RepoRoot(), "deploy", "default"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := testenv.NewApplier(r.cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	r.kubeconfigs = map[string]string{}
	for _, o := range testenv.RBACObjects(objs) {
		if err := a.Apply(ctx, o, false); err != nil {
			t.Fatalf("%s: %v", testenv.ObjKey(o), err)
		}
		if o.GetKind() != "ServiceAccount" {
			continue
		}
		ns := o.GetNamespace()
		cfg, err := r.cluster.UserConfig("system:serviceaccount:"+ns+":"+o.GetName(),
			"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, o.GetName()+".kubeconfig")
		if err := testenv.WriteKubeconfig(path, cfg); err != nil {
			t.Fatal(err)
		}
		r.kubeconfigs[o.GetName()] = path
	}
	for _, sa := range []string{"wva-adapter", "wva-controller", "wva-scale-from-zero"} {
		if r.kubeconfigs[sa] == "" {
			t.Fatalf("deploy/default has no ServiceAccount %s", sa)
		}
	}
}

// scrapeConfig is the fleet's scrape configuration plus wva's own metrics
// endpoints (as deploy/monitoring scrapes them: honor_labels for the
// adapter) and the kube-state-metrics stand-in.
func (r *rig) scrapeConfig(sd string) string {
	host := func(url string) string { return strings.TrimPrefix(url, "http://") }
	return fleet.ScrapeConfig(sd, scrapeInterval) +
		"  - job_name: wva-adapter\n    honor_labels: true\n    static_configs:\n      - targets: [\"" + host(r.adapter.MetricsURL) + "\"]\n" +
		"  - job_name: wva-components\n    static_configs:\n      - targets: [\"" + host(r.controller.MetricsURL) + "\", \"" + host(r.fastPath.MetricsURL) + "\"]\n" +
		"  - job_name: kube-state-metrics\n    honor_labels: true\n    static_configs:\n      - targets: [\"" + host(r.ksm.URL) + "\"]\n" +
		// The endpoint picker: its flow-control queue and request counter
		// (the slo-planner's demand), as a PodMonitor on the EPP would.
		"  - job_name: epp\n    metrics_path: /epp/metrics\n    static_configs:\n      - targets: [\"" + host(r.fleet.Addr) + "\"]\n"
}

// serveHPAMetrics is the one kube-state-metrics series the alert
// WVAHPANotFollowingDecisions reads, with its real name and labels, from
// the HPAs' status.
func (r *rig) serveHPAMetrics(w http.ResponseWriter, req *http.Request) {
	hpas, err := r.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(req.Context(), metav1.ListOptions{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "# TYPE kube_horizontalpodautoscaler_status_desired_replicas gauge")
	for _, h := range hpas.Items {
		fmt.Fprintf(w, "kube_horizontalpodautoscaler_status_desired_replicas{namespace=%q,horizontalpodautoscaler=%q} %d\n",
			h.Namespace, h.Name, h.Status.DesiredReplicas)
	}
}

// startController runs `wva controller` with deploy/'s ServiceAccount and
// extra flags (a later flag wins).
func (r *rig) startController(ctx context.Context, name string, extra ...string) *testenv.Process {
	args := append([]string{"controller", "--kubeconfig=" + r.kubeconfigs["wva-controller"],
		"--leader-elect=false", "--probe-namespace=" + configNS, "--resync=5s"}, extra...)
	return testenv.StartProcess(ctx, r.t, name, r.bin, args...)
}

// startAdapter runs `wva adapter` on a given secure port with the flags of
// deploy/ plus loopback addresses and test-speed intervals.
func (r *rig) startAdapter(ctx context.Context, port int) *testenv.Process {
	t := r.t
	lister := r.kubeconfigs["wva-adapter"]
	if r.opts.APIFaults != nil {
		lister = r.opts.APIFaults.kubeconfig
	}
	// Unique per process: a restarted adapter must not take over its
	// predecessor's Lease by name before the Lease expires.
	id := fmt.Sprintf("adapter-%d-%d", port, len(r.leaseIdentity))
	args := []string{"adapter", "--leader-election-identity=" + id,
		fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1",
		"--tls-cert-file=" + r.certFile, "--tls-private-key-file=" + r.keyFile,
		"--lister-kubeconfig=" + lister,
		"--authentication-kubeconfig=" + r.kubeconfigs["wva-adapter"], "--authorization-kubeconfig=" + r.kubeconfigs["wva-adapter"],
		"--prometheus-url=" + r.prom.URL, "--engine-interval=" + r.opts.EngineInterval.String(), "--status-heartbeat=10s",
		"--config-namespace=" + configNS, "--leader-elect=true", "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s", "--v=2"}
	p := testenv.StartProcess(ctx, t, fmt.Sprintf("adapter:%d", port), r.bin, args...)
	r.leaseIdentity[p] = id
	return p
}

// leaseHolder is the holderIdentity of the adapters' Lease ("" if none).
func (r *rig) leaseHolder(ctx context.Context) string {
	l, err := r.kube.CoordinationV1().Leases(configNS).Get(ctx, "wva-adapter", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// deploy creates a namespace-local Deployment whose pods each take one GPU
// on a kwok node, and its VA.
// selectPercentage creates wva-saturation-scaling-config with a default
// entry that selects the percentage analyzer: the scenarios' loads are sized
// by its KV thresholds (the built-in default is the slo-planner).
func (r *rig) selectPercentage(ctx context.Context, t *testing.T) {
	const entry = "analyzerName: saturation-percentage"
	_, err := r.kube.CoreV1().ConfigMaps(configNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-saturation-scaling-config", Labels: map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}},
		Data:       map[string]string{"default": entry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// In force once the leader keeps it as the last good entry, which a
	// later broken edit (badInput) then leaves in force.
	testenv.Eventually(ctx, t, "the percentage entry kept as last good", func() (bool, string) {
		cm, err := r.kube.CoreV1().ConfigMaps(configNS).Get(ctx, "wva-last-good-config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cm.Data["wva-saturation-scaling-config.default"] == entry, fmt.Sprint(cm.Data)
	})
}

func (r *rig) deploy(ctx context.Context, t *testing.T, ns, name, model, cost string, replicas, min, max int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{harness.KwokNodeLabel: "kwok"},
					Tolerations:  []corev1.Toleration{harness.KwokToleration},
					Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai",
						Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}},
				},
			},
		},
	}
	if _, err := r.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	va := &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			ModelID:        model, MinReplicas: ptr.To(min), MaxReplicas: max, VariantCost: cost, AcceleratorName: "L4",
		},
	}
	if _, err := r.wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) specReplicas(ctx context.Context, ns, name string) int32 {
	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return *d.Spec.Replicas
}

func (r *rig) readyPods(ctx context.Context, ns, name string) int {
	pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}

// waitReplicas waits until the Deployment's spec.replicas is want and
// returns when that was first seen.
func (r *rig) waitReplicas(ctx context.Context, t *testing.T, ns, name string, want int32) time.Time {
	t.Helper()
	testenv.Eventually(ctx, t, fmt.Sprintf("%s/%s spec.replicas=%d", ns, name, want), func() (bool, string) {
		got := r.specReplicas(ctx, ns, name)
		return got == want, fmt.Sprint(got)
	})
	return time.Now()
}

func (r *rig) waitReady(ctx context.Context, t *testing.T, ns, name string, want int) time.Time {
	t.Helper()
	testenv.Eventually(ctx, t, fmt.Sprintf("%s/%s %d Ready pods", ns, name, want), func() (bool, string) {
		got := r.readyPods(ctx, ns, name)
		return got == want, fmt.Sprint(got)
	})
	return time.Now()
}

// holdReplicas asserts the Deployment keeps want replicas for d.
func (r *rig) holdReplicas(ctx context.Context, t *testing.T, ns, name string, want int32, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if got := r.specReplicas(ctx, ns, name); got != want {
			t.Fatalf("%s/%s: spec.replicas %d, want %d held for %s", ns, name, got, want, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitPrometheus waits until a PromQL expression's maximum reaches at least
// min and returns when Prometheus first showed it.
func (r *rig) waitPrometheus(ctx context.Context, t *testing.T, expr string, min float64) time.Time {
	t.Helper()
	testenv.Eventually(ctx, t, fmt.Sprintf("%s >= %g in Prometheus", expr, min), func() (bool, string) {
		s, err := r.prom.Query(ctx, expr)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range s {
			if v.Value >= min {
				return true, ""
			}
		}
		return false, fmt.Sprint(s)
	})
	return time.Now()
}

func (r *rig) va(ctx context.Context, t *testing.T, ns, name string) *llmdv1alpha1.VariantAutoscaling {
	t.Helper()
	va, err := r.wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return va
}

// queriesPerCycle reads the adapter's own gauge.
func (r *rig) queriesPerCycle(ctx context.Context) string {
	body, err := testenv.Get(ctx, r.adapter.MetricsURL+"/metrics")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "wva_prometheus_queries_per_cycle ") {
			return strings.TrimPrefix(line, "wva_prometheus_queries_per_cycle ")
		}
	}
	return "?"
}

// report collects the figures the rig prints at the end.
type report struct{ lines []string }

func (rp *report) add(format string, args ...any) {
	rp.lines = append(rp.lines, fmt.Sprintf(format, args...))
}

func (rp *report) print(t *testing.T) {
	fmt.Println("\n=== e2e measurements ===")
	for _, l := range rp.lines {
		fmt.Println(l)
	}
}
