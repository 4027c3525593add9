// Package daemon holds what every long-running wva component needs: the
// plain-HTTP /metrics, /healthz and /readyz endpoints and running work under
// a Lease.
package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Serve starts /metrics (from gatherer), /healthz and /readyz (ready()
// returns nil when ready) on addr until ctx ends. addr "" or "0" disables.
func Serve(ctx context.Context, addr string, gatherer prometheus.Gatherer, ready func() error) error {
	if addr == "" || addr == "0" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-bind-address=%s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("serving /metrics, /healthz, /readyz", "address", ln.Addr().String())
	return nil
}

// Lease configures leader election.
type Lease struct {
	Enabled       bool
	Namespace     string
	Name          string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// RunLeaderElected runs work while this process holds the Lease (or at once
// when election is disabled), re-entering the election after losing it,
// until ctx ends. leading reports the current state (may be nil).
func RunLeaderElected(ctx context.Context, kube kubernetes.Interface, lease Lease, recorder record.EventRecorder,
	leading func(bool), work func(context.Context)) error {
	set := func(b bool) {
		if leading != nil {
			leading(b)
		}
	}
	run := func(ctx context.Context) {
		set(true)
		defer set(false)
		work(ctx)
	}
	if !lease.Enabled {
		run(ctx)
		return nil
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%d", host, time.Now().UnixNano())
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
