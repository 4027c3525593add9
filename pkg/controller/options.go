package controller

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/wva-project/wva/pkg/daemon"
)

// Options are `wva controller`'s flags.
type Options struct {
	Kubeconfig        string
	Workers           int
	Resync            time.Duration
	StaleAfter        time.Duration
	HPATolerance      string
	HPAScaleToZero    string
	ProbeNamespace    string
	WatchNamespace    string
	Endpoints         daemon.Endpoints
	Lease             daemon.Lease
	Output            string
	KedaScalerAddress string
	// KedaAuthentication is "[Kind/]name" of a (Cluster)TriggerAuthentication.
	KedaAuthentication string
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
		Output:    string(OutputHPA),
		Endpoints: daemon.DefaultEndpoints(":8443", ":8082"), Lease: daemon.DefaultLease("wva-controller", ns, true),
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster config)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Concurrent reconciles")
	fs.DurationVar(&o.Resync, "resync", o.Resync, "Re-examine every VA this often (decisions change without spec changes)")
	fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "Never act directly on a decision older than this (status lastRunTime)")
	fs.StringVar(&o.HPATolerance, "hpa-tolerance", o.HPATolerance, "Does the cluster's HPA accept behavior.*.tolerance? auto (probe with a server-side dry run), true, false")
	fs.StringVar(&o.HPAScaleToZero, "hpa-scale-to-zero", o.HPAScaleToZero, "Does the cluster's HPA accept minReplicas 0? auto (probe with a server-side dry run), true, false")
	fs.StringVar(&o.ProbeNamespace, "probe-namespace", o.ProbeNamespace, "Namespace for the dry-run capability probes (default: $POD_NAMESPACE or wva-system)")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "Only manage VAs in this namespace (default: all)")
	o.Endpoints.AddFlags(fs)
	fs.StringVar(&o.Output, "output", o.Output, "What to keep per VA: hpa (an autoscaling/v2 HPA on the external metrics API) or "+
		"scaledobject (a KEDA ScaledObject whose external-push trigger reads the adapter's --keda-scaler-address)")
	fs.StringVar(&o.KedaScalerAddress, "keda-scaler-address", o.KedaScalerAddress,
		"With --output=scaledobject: host:port KEDA dials for the adapter's external scaler, e.g. wva-adapter.wva-system.svc:9090")
	fs.StringVar(&o.KedaAuthentication, "keda-trigger-authentication", o.KedaAuthentication,
		"With --output=scaledobject: [Kind/]name of the TriggerAuthentication or ClusterTriggerAuthentication giving KEDA the scaler's CA "+
			"(caCert) and client certificate (tlsClientCert, tlsClientKey), set as the trigger's authenticationRef, "+
			"e.g. ClusterTriggerAuthentication/wva-keda-scaler (default: none, KEDA dials without TLS)")
	o.Lease.AddFlags(fs, "Run one active replica (Lease)")
}

// Validate names the flag and value of every problem.
func (o *Options) Validate() error {
	var errs []error
	for flag, v := range map[string]string{"--hpa-tolerance": o.HPATolerance, "--hpa-scale-to-zero": o.HPAScaleToZero} {
		if v != "auto" && v != "true" && v != "false" {
			errs = append(errs, fmt.Errorf("%s=%q: want auto, true or false", flag, v))
		}
	}
	switch Output(o.Output) {
	case OutputHPA:
	case OutputScaledObject:
		if _, port, err := net.SplitHostPort(o.KedaScalerAddress); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--keda-scaler-address=%q: --output=scaledobject needs the adapter scaler's host:port", o.KedaScalerAddress))
		}
		if _, err := ParseKedaAuthenticationRef(o.KedaAuthentication); err != nil {
			errs = append(errs, fmt.Errorf("--keda-trigger-authentication=%w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("--output=%q: want hpa or scaledobject", o.Output))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers=%d: must be >= 1", o.Workers))
	}
	if o.Resync <= 0 || o.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--resync (%s) and --stale-after (%s) must be positive", o.Resync, o.StaleAfter))
	}
	if err := o.Endpoints.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
