// Package daemon holds what every long-running wva component needs: the
// /metrics endpoint behind the API server's delegated authentication and
// authorization, the plain /healthz and /readyz probes, and running work
// under a Lease.
package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// MetricsHandler serves gatherer's metrics in the Prometheus formats.
func MetricsHandler(gatherer prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
}

// ProbeHandler serves /healthz (500 with live()'s error; nil live: always
// ok) and /readyz (503 with ready()'s error).
func ProbeHandler(ready, live func() error) http.Handler {
	mux := http.NewServeMux()
	probe := func(check func() error, code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if check != nil {
				if err := check(); err != nil {
					http.Error(w, err.Error(), code)
					return
				}
			}
			_, _ = w.Write([]byte("ok"))
		}
	}
	mux.HandleFunc("/healthz", probe(live, http.StatusInternalServerError))
	mux.HandleFunc("/readyz", probe(ready, http.StatusServiceUnavailable))
	return mux
}

// Lease configures leader election.
type Lease struct {
	Enabled       bool
	Namespace     string
	Name          string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Identity is written to the Lease's holderIdentity while this process
	// leads; empty: hostname_<start time in ns>, unique per process.
	Identity string
}

// RunLeaderElected runs work while this process holds the Lease (or at once
// when election is disabled), re-entering the election after losing it,
// until ctx ends. leading reports the current state (may be nil).
//
// One work runs at a time: client-go starts OnStartedLeading in a goroutine
// and does not wait for it when the Lease is lost, so a replica that regains
// the Lease at once would start a second work beside the one still ending
// (two engine loops writing statuses). A new term waits for the previous
// work to return, and gives up if that term is lost meanwhile.
func RunLeaderElected(ctx context.Context, kube kubernetes.Interface, lease Lease, recorder record.EventRecorder,
	leading func(bool), work func(context.Context)) error {
	set := func(b bool) {
		if leading != nil {
			leading(b)
		}
	}
	running := make(chan struct{}, 1)
	run := func(ctx context.Context) {
		select {
		case running <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-running }()
		if ctx.Err() != nil {
			return
		}
		set(true)
		defer set(false)
		work(ctx)
	}
	if !lease.Enabled {
		run(ctx)
		return nil
	}
	id := lease.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s_%d", host, time.Now().UnixNano())
	}
	klog.InfoS("leader election", "identity", id, "lease", lease.Namespace+"/"+lease.Name)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, lease.Namespace, lease.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("leader election lock %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: lease.LeaseDuration, RenewDeadline: lease.RenewDeadline,
			RetryPeriod: lease.RetryPeriod, ReleaseOnCancel: true, Name: lease.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: run,
				OnStoppedLeading: func() { klog.InfoS("stopped leading", "identity", id) },
				OnNewLeader:      func(l string) { klog.InfoS("leader", "identity", l) },
			},
		})
	}
	return nil
}

// DefaultLease is a Lease with client-go's customary timings.
func DefaultLease(name, namespace string, enabled bool) Lease {
	return Lease{Enabled: enabled, Namespace: namespace, Name: name,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// AddFlags registers the conventional --leader-elect* flags; enabledHelp
// says what election guards in this component.
func (l *Lease) AddFlags(fs *pflag.FlagSet, enabledHelp string) {
	fs.BoolVar(&l.Enabled, "leader-elect", l.Enabled, enabledHelp)
	fs.StringVar(&l.Name, "leader-election-lease-name", l.Name, "Name of the coordination.k8s.io Lease")
	fs.StringVar(&l.Namespace, "leader-election-namespace", l.Namespace, "Namespace of the Lease (default: the component's config namespace)")
	fs.DurationVar(&l.LeaseDuration, "leader-election-lease-duration", l.LeaseDuration, "Lease duration")
	fs.DurationVar(&l.RenewDeadline, "leader-election-renew-deadline", l.RenewDeadline, "Lease renew deadline")
	fs.DurationVar(&l.RetryPeriod, "leader-election-retry-period", l.RetryPeriod, "Lease retry period")
	fs.StringVar(&l.Identity, "leader-election-identity", l.Identity, "holderIdentity written to the Lease while leading; must differ between replicas (default: hostname_<start time in ns>)")
}

// Validate requires lease duration > renew deadline > retry period > 0, as
// client-go's elector does.
func (l Lease) Validate() error {
	if l.Enabled && !(l.LeaseDuration > l.RenewDeadline && l.RenewDeadline > l.RetryPeriod && l.RetryPeriod > 0) {
		return fmt.Errorf("leader election: want lease-duration (%s) > renew-deadline (%s) > retry-period (%s) > 0",
			l.LeaseDuration, l.RenewDeadline, l.RetryPeriod)
	}
	return nil
}

// RESTConfig loads --kubeconfig, or the in-cluster config when it is empty.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}

// APIServed reports whether the API server serves a resource (for optional
// APIs such as LeaderWorkerSet).
func APIServed(kube kubernetes.Interface, gvr schema.GroupVersionResource) bool {
	res, err := kube.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range res.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}
