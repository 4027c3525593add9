package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// DefaultControllers is the --controllers list StartControllerManager uses
// when none is given: enough for Deployments, HPAs, namespaces, garbage
// collection and service accounts (pods need the "default" one).
var DefaultControllers = []string{
	"horizontal-pod-autoscaler-controller",
	"garbage-collector-controller",
	"deployment-controller",
	"replicaset-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"endpointslice-controller",
	"resourcequota-controller",
}

// ControllerManagerOptions configures StartControllerManager.
type ControllerManagerOptions struct {
	// Controllers is --controllers (default DefaultControllers). Names are
	// those of `kube-controller-manager --help`; "*" means all on by default.
	Controllers []string
	// HPASyncPeriod is --horizontal-pod-autoscaler-sync-period (default 1s).
	HPASyncPeriod time.Duration
	// FeatureGates is passed as --feature-gates.
	FeatureGates map[string]bool
	// Args are appended to the generated flags (a later flag wins).
	Args []string
	// Verbosity is -v (default 0).
	Verbosity int
	// StartTimeout bounds waiting for /healthz (default 1 minute).
	StartTimeout time.Duration
}

// SchedulerOptions configures StartScheduler.
type SchedulerOptions struct {
	FeatureGates map[string]bool
	Args         []string
	Verbosity    int
	StartTimeout time.Duration
}

// Component is a control-plane process started on a Cluster.
type Component struct {
	Name string
	// URL is the component's secure serving address, https://127.0.0.1:<port>.
	URL string
	// LogPath holds its stdout and stderr.
	LogPath string
	proc    *process
}

// Stop kills the component. Safe to call more than once.
func (c *Component) Stop() { c.proc.stop(5 * time.Second) }

// Exited reports whether the process has ended, and its exit error.
func (c *Component) Exited() (bool, error) { return c.proc.exited() }

// LogTail returns the last lines of the component's log.
func (c *Component) LogTail() string { return c.proc.tail() }

// StartControllerManager starts kube-controller-manager against the cluster
// (admin credentials, --use-service-account-credentials=false, no leader
// election) and waits for /healthz. Cluster.Stop stops it too.
func (c *Cluster) StartControllerManager(ctx context.Context, opts ControllerManagerOptions) (*Component, error) {
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	if opts.HPASyncPeriod <= 0 {
		opts.HPASyncPeriod = time.Second
	}
	args := []string{
		"--controllers=" + strings.Join(controllers, ","),
		"--horizontal-pod-autoscaler-sync-period=" + opts.HPASyncPeriod.String(),
		"--use-service-account-credentials=false",
		"--root-ca-file=" + c.pki.caFile,
		"--service-account-private-key-file=" + c.pki.saKeyFile,
		"--service-cluster-ip-range=" + c.opts.ServiceClusterIPRange,
		"--cluster-signing-cert-file=" + c.pki.caFile,
		"--cluster-signing-key-file=" + filepath.Join(c.Dir, "pki", "ca.key"),
	}
	if len(opts.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+featureGates(opts.FeatureGates))
	}
	args = append(args, fmt.Sprintf("--v=%d", opts.Verbosity))
	args = append(args, opts.Args...)
	return c.startComponent(ctx, "kube-controller-manager", BinKubeControllerManager, args, opts.StartTimeout)
}

// StartScheduler starts kube-scheduler against the cluster and waits for
// /healthz. Cluster.Stop stops it too.
func (c *Cluster) StartScheduler(ctx context.Context, opts SchedulerOptions) (*Component, error) {
	var args []string
	if len(opts.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+featureGates(opts.FeatureGates))
	}
	args = append(args, fmt.Sprintf("--v=%d", opts.Verbosity))
	args = append(args, opts.Args...)
	return c.startComponent(ctx, "kube-scheduler", BinKubeScheduler, args, opts.StartTimeout)
}

// StartControllerManagerT is StartControllerManager that fails t on error.
func (c *Cluster) StartControllerManagerT(t testing.TB, opts ControllerManagerOptions) *Component {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	comp, err := c.StartControllerManager(ctx, opts)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return comp
}

// StartSchedulerT is StartScheduler that fails t on error.
func (c *Cluster) StartSchedulerT(t testing.TB, opts SchedulerOptions) *Component {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	comp, err := c.StartScheduler(ctx, opts)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return comp
}

func (c *Cluster) startComponent(ctx context.Context, name, bin string, extra []string, timeout time.Duration) (_ *Component, err error) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil, errors.New("harness: cluster is stopped")
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	serving, err := c.pki.ca.issue(name, nil, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, false)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := serving.write(filepath.Join(c.Dir, "pki"), name)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--leader-elect=false",
	}
	args = append(args, extra...)
	proc, err := startProcess(name, c.Dir, filepath.Join(c.BinDir, bin), args)
	if err != nil {
		return nil, err
	}
	comp := &Component{Name: name, URL: "https://" + hostPort(port), LogPath: proc.logPath, proc: proc}
	c.mu.Lock()
	c.comps = append(c.comps, comp)
	c.mu.Unlock()
	c.opts.logf("harness: starting %s on %s", name, comp.URL)
	if err := waitReady(ctx, proc, insecureClient(), comp.URL+"/healthz", status2xx); err != nil {
		comp.Stop()
		return nil, err
	}
	return comp, nil
}
