// Package harness runs a real Kubernetes control plane (etcd,
// kube-apiserver, and optionally kube-controller-manager and kube-scheduler)
// and a real Prometheus on loopback, for integration and e2e tests of wva.
//
// The control-plane binaries are built from pinned sources by
// test/tools/build.sh (see README.md); Prometheus is Debian's package.
//
// Typical use from a test:
//
//	c := harness.StartT(t, harness.Options{})
//	cs := c.Clientset()
//	kcm := c.StartControllerManagerT(t, harness.ControllerManagerOptions{})
//
// Every process runs in its own process group, is killed on Stop, and (on
// Linux) is killed by the kernel if the test process dies.
package harness

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir holds certificates, data, kubeconfig and process logs. Empty means
	// a new temporary directory, removed by Stop unless KeepDir is set.
	Dir     string
	KeepDir bool

	// BinDir overrides where the binaries are found (see EnsureBinaries).
	BinDir string

	// ServiceClusterIPRange is --service-cluster-ip-range (default
	// 10.0.0.0/24). Nothing routes to it: there is no kube-proxy.
	ServiceClusterIPRange string

	// FeatureGates is passed as --feature-gates to kube-apiserver.
	FeatureGates map[string]bool

	// DisableAggregatorRouting sets --enable-aggregator-routing=false. By
	// default it is true, so the aggregator dials EndpointSlice addresses,
	// not Service ClusterIPs (which nothing serves here).
	DisableAggregatorRouting bool

	// APIServerArgs and EtcdArgs are appended to the generated flags; a
	// later flag wins, so they can also override defaults ("--flag=value").
	APIServerArgs []string
	EtcdArgs      []string

	// Verbosity is kube-apiserver's -v (default 0).
	Verbosity int

	// StartTimeout bounds starting etcd and kube-apiserver, after the
	// binaries are found (default 2 minutes).
	StartTimeout time.Duration

	// Logf, if set, receives progress messages.
	Logf func(format string, args ...any)
}

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	// RESTConfig authenticates as an admin user in system:masters.
	RESTConfig *rest.Config
	// KubeconfigPath is a kubeconfig file with the same credentials.
	KubeconfigPath string
	// Dir is the working directory: certs, etcd data, *.log per process.
	Dir string
	// BinDir is where the control-plane binaries were found.
	BinDir string
	// Host is the apiserver URL, https://127.0.0.1:<port>.
	Host string
	// EtcdURL is etcd's client URL (plain http on loopback).
	EtcdURL string

	// CAFile/CAPEM: the cluster CA, which signed the apiserver serving cert
	// and client certs. FrontProxyCAFile/FrontProxyCAPEM: the request-header
	// CA that signed the aggregator's proxy client cert (CN
	// front-proxy-client).
	CAFile           string
	CAPEM            []byte
	FrontProxyCAFile string
	FrontProxyCAPEM  []byte
	// ServiceAccountKeyFile is the service-account signing key (PEM).
	ServiceAccountKeyFile string

	opts    Options
	pki     *pki
	ownDir  bool
	etcd    *process
	apiSrv  *process
	mu      sync.Mutex
	comps   []*Component
	stopped bool
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Start starts etcd and kube-apiserver and waits until /readyz is ok. ctx
// bounds the start (including a build of missing binaries), not the
// cluster's life: call Stop.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = EnsureBinaries(ctx); err != nil {
			return nil, err
		}
	} else if m := missingBinaries(binDir); len(m) > 0 {
		return nil, fmt.Errorf("harness: %s missing in %s", strings.Join(m, ", "), binDir)
	}
	if opts.ServiceClusterIPRange == "" {
		opts.ServiceClusterIPRange = "10.0.0.0/24"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	_, svcNet, err := net.ParseCIDR(opts.ServiceClusterIPRange)
	if err != nil {
		return nil, fmt.Errorf("harness: ServiceClusterIPRange: %w", err)
	}
	firstIP := slices.Clone(svcNet.IP.To4())
	if firstIP == nil {
		firstIP = slices.Clone(svcNet.IP)
	}
	firstIP[len(firstIP)-1]++

	c := &Cluster{opts: opts, BinDir: binDir, Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "wva-testcluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.opts.KeepDir = true // keep the logs named in err
			c.Stop()
			err = fmt.Errorf("%w\n(cluster dir kept: %s)", err, c.Dir)
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki"), firstIP); err != nil {
		return nil, err
	}
	c.CAFile, c.CAPEM = c.pki.caFile, c.pki.ca.certPEM
	c.FrontProxyCAFile, c.FrontProxyCAPEM = c.pki.frontProxyCAFile, c.pki.frontProxyCA.certPEM
	c.ServiceAccountKeyFile = c.pki.saKeyFile

	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, firstIP); err != nil {
		return nil, err
	}
	return c, nil
}

// StartT is Start for tests: it fails t on error and registers Stop with
// t.Cleanup. If the test failed, the directory is kept and the tail of every
// process log is logged.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := testContext(t)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("harness.Start: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.mu.Lock()
			c.opts.KeepDir = true
			c.mu.Unlock()
			t.Logf("harness: test failed; cluster dir kept: %s\n%s", c.Dir, c.LogTails())
		}
		c.Stop()
	})
	return c
}

// testContext is bounded by the test's deadline, if any.
func testContext(t testing.TB) (context.Context, context.CancelFunc) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			return context.WithDeadline(context.Background(), dl.Add(-5*time.Second))
		}
	}
	return context.WithCancel(context.Background())
}

func featureGates(m map[string]bool) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%t", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	client, peer := "http://"+hostPort(ports[0]), "http://"+hostPort(ports[1])
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=2147483648",
		"--log-level=warn",
	}
	args = append(args, c.opts.EtcdArgs...)
	c.opts.logf("harness: starting etcd on %s", client)
	if c.etcd, err = startProcess("etcd", c.Dir, filepath.Join(c.BinDir, BinEtcd), args); err != nil {
		return err
	}
	c.EtcdURL = client
	return waitReady(ctx, c.etcd, &http.Client{Timeout: 5 * time.Second}, client+"/health", func(code int, body []byte) bool {
		return code == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
	})
}

func (c *Cluster) startAPIServer(ctx context.Context, firstServiceIP net.IP) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	p := c.pki
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.caFile,
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + c.opts.ServiceClusterIPRange,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		// Front proxy / aggregation layer.
		"--requestheader-client-ca-file=" + p.frontProxyCAFile,
		"--requestheader-allowed-names=" + frontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyCert,
		"--proxy-client-key-file=" + p.frontProxyKey,
		fmt.Sprintf("--enable-aggregator-routing=%t", !c.opts.DisableAggregatorRouting),
		// Nothing could reach 127.0.0.1 through the "kubernetes" Service's
		// endpoints (loopback endpoints are invalid anyway).
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		fmt.Sprintf("--v=%d", c.opts.Verbosity),
	}
	if len(c.opts.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+featureGates(c.opts.FeatureGates))
	}
	args = append(args, c.opts.APIServerArgs...)

	c.Host = "https://" + hostPort(port)
	c.opts.logf("harness: starting kube-apiserver on %s (dir %s)", c.Host, c.Dir)
	if c.apiSrv, err = startProcess("kube-apiserver", c.Dir, filepath.Join(c.BinDir, BinKubeAPIServer), args); err != nil {
		return err
	}

	c.RESTConfig = &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.ca.certPEM,
			CertData: p.admin.certPEM,
			KeyData:  p.admin.keyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Host, p.ca.certPEM, p.admin.certPEM, p.admin.keyPEM); err != nil {
		return err
	}

	hc, err := rest.HTTPClientFor(c.RESTConfig)
	if err != nil {
		return err
	}
	hc.Timeout = 10 * time.Second
	if err := waitReady(ctx, c.apiSrv, hc, c.Host+"/readyz?verbose", status2xx); err != nil {
		return err
	}
	c.opts.logf("harness: kube-apiserver ready; KUBECONFIG=%s", c.KubeconfigPath)
	return nil
}

func writeKubeconfig(path, host string, ca, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wva-test"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["wva-test"] = &clientcmdapi.Context{Cluster: "wva-test", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "wva-test"
	return clientcmd.WriteToFile(*cfg, path)
}

// Clientset returns a clientset for RESTConfig.
func (c *Cluster) Clientset() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(rest.CopyConfig(c.RESTConfig))
}

// IssueServingCert returns a PEM serving cert and key signed by the cluster
// CA (CAPEM). An extension apiserver behind an APIService needs DNS name
// "<service>.<namespace>.svc", which is the name the aggregator verifies.
func (c *Cluster) IssueServingCert(dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	kp, err := c.pki.ca.issue(firstOr(dnsNames, "wva-test-server"), nil, dnsNames, ips, false)
	if err != nil {
		return nil, nil, err
	}
	return kp.certPEM, kp.keyPEM, nil
}

// UserConfig returns a rest.Config that authenticates as user with groups by
// a client cert signed by the cluster CA (subject to RBAC).
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := c.pki.ca.issue(user, groups, nil, nil, true)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.CertData, cfg.KeyData = kp.certPEM, kp.keyPEM
	return cfg, nil
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// LogTails returns the last lines of every process log in Dir.
func (c *Cluster) LogTails() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	for _, f := range files {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", f, tailFile(f, 25))
	}
	return b.String()
}

// Stop kills every process started for the cluster (components first) and
// removes Dir if Start created it and KeepDir is not set. Safe to call more
// than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	comps := slices.Clone(c.comps)
	keep := c.opts.KeepDir
	c.mu.Unlock()

	for _, comp := range slices.Backward(comps) {
		comp.Stop()
	}
	c.apiSrv.stop(5 * time.Second)
	c.etcd.stop(5 * time.Second)
	if c.ownDir && !keep {
		_ = os.RemoveAll(c.Dir)
	}
}
