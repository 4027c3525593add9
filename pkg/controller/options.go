package controller

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
)

// Options are `wva controller`'s flags.
type Options struct {
	Kubeconfig         string
	Workers            int
	Resync             time.Duration
	StaleAfter         time.Duration
	HPATolerance       string
	HPAScaleToZero     string
	ProbeNamespace     string
	WatchNamespace     string
	MetricsBindAddress string
	LeaderElect        bool
	LeaseName          string
	LeaseNamespace     string
	LeaseDuration      time.Duration
	RenewDeadline      time.Duration
	RetryPeriod        time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "wva-system"
	}
	return &Options{
		Workers: 2, Resync: 30 * time.Second, StaleAfter: 5 * time.Minute,
		HPATolerance: "auto", HPAScaleToZero: "auto", ProbeNamespace: ns,
		MetricsBindAddress: ":8082", LeaderElect: true, LeaseName: "wva-controller", LeaseNamespace: ns,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster config)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Concurrent reconciles")
	fs.DurationVar(&o.Resync, "resync", o.Resync, "Re-examine every VA this often (decisions change without spec changes)")
	fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "Never act directly on a decision older than this (status lastRunTime)")
	fs.StringVar(&o.HPATolerance, "hpa-tolerance", o.HPATolerance, "Does the cluster's HPA accept behavior tolerance? auto (probe), true, false")
	fs.StringVar(&o.HPAScaleToZero, "hpa-scale-to-zero", o.HPAScaleToZero, "Does the cluster's HPA accept minReplicas 0? auto (probe), true, false")
	fs.StringVar(&o.ProbeNamespace, "probe-namespace", o.ProbeNamespace, "Namespace for the dry-run capability probes (default: $POD_NAMESPACE or wva-system)")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "Only manage VAs in this namespace (default: all)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics, /healthz and /readyz (\"0\" disables)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run one active replica (Lease)")
	fs.StringVar(&o.LeaseName, "leader-election-lease-name", o.LeaseName, "Lease name")
	fs.StringVar(&o.LeaseNamespace, "leader-election-namespace", o.LeaseNamespace, "Lease namespace")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "Lease duration")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "Lease renew deadline")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "Lease retry period")
}

// Validate names the flag and value of every problem.
func (o *Options) Validate() error {
	var errs []error
	for flag, v := range map[string]string{"--hpa-tolerance": o.HPATolerance, "--hpa-scale-to-zero": o.HPAScaleToZero} {
		if v != "auto" && v != "true" && v != "false" {
			errs = append(errs, fmt.Errorf("%s=%q: want auto, true or false", flag, v))
		}
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers=%d: must be >= 1", o.Workers))
	}
	if o.Resync <= 0 || o.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--resync (%s) and --stale-after (%s) must be positive", o.Resync, o.StaleAfter))
	}
	if o.LeaderElect && !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election: want lease-duration (%s) > renew-deadline (%s) > retry-period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	return errors.Join(errs...)
}
