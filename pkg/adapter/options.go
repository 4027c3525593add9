// Package adapter wires `wva adapter`: informers, the config store, the
// engine (leader only), the external-metrics provider (every replica) and
// the adapter's own /metrics and health endpoints.
package adapter

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/kedascaler"
)

// Options are the adapter's own flags (the generic API server's secure
// serving and delegated authn/authz flags come from custom-metrics-apiserver).
type Options struct {
	PrometheusURL                string
	PrometheusCAFile             string
	PrometheusInsecureSkipVerify bool
	PrometheusBearerTokenFile    string
	PrometheusTimeout            time.Duration
	PrometheusNamespaceLabel     string
	PrometheusPodLabel           string

	EngineInterval  time.Duration
	CycleTimeout    time.Duration
	StatusHeartbeat time.Duration
	StaleAfter      time.Duration

	ConfigNamespace string
	WatchNamespace  string

	// PodDeletionCost annotates a Deployment's Ready pods with their
	// running requests before a scale-down, so its ReplicaSet deletes the
	// idle ones first.
	PodDeletionCost bool

	// Budget is the GPU budget every scale-up is admitted against (and
	// enableLimiter groups share).
	Budget budget.Flags

	Lease                daemon.Lease
	Endpoints            daemon.Endpoints
	ReadinessMaxCycleAge time.Duration
	// LivenessStaleAfter: the leader fails /healthz when its engine has
	// ended no cycle for this long.
	LivenessStaleAfter time.Duration

	// KedaScalerAddress, when set, also serves the decisions as a KEDA
	// external scaler (gRPC), for clusters whose external-metrics
	// APIService belongs to KEDA.
	KedaScalerAddress        string
	KedaScalerResendInterval time.Duration
	// KedaScalerTLS secures the scaler; KedaScalerInsecure opts in to
	// plain gRPC instead.
	KedaScalerTLS      kedascaler.TLSFiles
	KedaScalerInsecure bool

	// Pinned are the ConfigMap keys --config-file and WVA_* variables pin
	// over every ConfigMap entry (not a flag: config.Load fills it).
	Pinned config.Pinned
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "wva-system"
	}
	return &Options{
		PrometheusTimeout:        10 * time.Second,
		PrometheusNamespaceLabel: collector.DefaultLabels().Namespace,
		PrometheusPodLabel:       collector.DefaultLabels().Pod,
		EngineInterval:           30 * time.Second,
		StatusHeartbeat:          2 * time.Minute,
		ConfigNamespace:          ns,
		PodDeletionCost:          true,
		Budget:                   budget.DefaultFlags(),
		Lease:                    daemon.DefaultLease("wva-adapter", "", true),
		Endpoints:                daemon.DefaultEndpoints(":8443", ":8080"),
		KedaScalerResendInterval: kedascaler.DefaultResendInterval,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL, "Base URL of the Prometheus HTTP API (required), e.g. https://prometheus.monitoring:9090")
	fs.StringVar(&o.PrometheusCAFile, "prometheus-ca-file", o.PrometheusCAFile, "CA bundle to verify Prometheus' TLS certificate")
	fs.BoolVar(&o.PrometheusInsecureSkipVerify, "prometheus-insecure-skip-verify", o.PrometheusInsecureSkipVerify, "Skip TLS verification of Prometheus (testing only)")
	fs.StringVar(&o.PrometheusBearerTokenFile, "prometheus-bearer-token-file", o.PrometheusBearerTokenFile, "File with a bearer token for Prometheus; re-read on every request so rotated tokens work")
	fs.DurationVar(&o.PrometheusTimeout, "prometheus-timeout", o.PrometheusTimeout, "Timeout of one Prometheus query")
	fs.StringVar(&o.PrometheusNamespaceLabel, "prometheus-namespace-label", o.PrometheusNamespaceLabel, "Prometheus label holding a vLLM series' pod namespace (as the PodMonitor's relabeling names it)")
	fs.StringVar(&o.PrometheusPodLabel, "prometheus-pod-label", o.PrometheusPodLabel, "Prometheus label holding a vLLM series' pod name (as the PodMonitor's relabeling names it)")
	fs.DurationVar(&o.EngineInterval, "engine-interval", o.EngineInterval, "Time between decision cycles (cycles also run on VA and ConfigMap changes)")
	fs.DurationVar(&o.CycleTimeout, "cycle-timeout", o.CycleTimeout, "Bound on one cycle (default: the engine interval)")
	fs.DurationVar(&o.StatusHeartbeat, "status-heartbeat", o.StatusHeartbeat, "Rewrite an unchanged VA status this often to refresh lastRunTime (changes are written at once)")
	fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "Age past which a served decision counts as stale in metrics: wva_decision_age_seconds, wva_external_metric_requests_total{result=\"stale\"} (default: heartbeat + 2 intervals)")
	fs.StringVar(&o.ConfigNamespace, "config-namespace", o.ConfigNamespace, "Namespace of the wva ConfigMaps (default: $POD_NAMESPACE or wva-system)")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "Only manage VAs in this namespace (default: all)")
	fs.BoolVar(&o.PodDeletionCost, "pod-deletion-cost", o.PodDeletionCost,
		"Before scaling a Deployment down, set controller.kubernetes.io/pod-deletion-cost on its Ready pods to their running requests (vllm:num_requests_running), so its ReplicaSet deletes idle pods first (needs pods patch); StatefulSets and LeaderWorkerSets are left alone")
	o.Budget.AddFlags(fs)
	o.Lease.AddFlags(fs, "Elect one replica to run the engine (all replicas serve metrics)")
	o.Endpoints.AddFlags(fs)
	fs.DurationVar(&o.LivenessStaleAfter, "liveness-stale-after", o.LivenessStaleAfter,
		"The leader fails /healthz (500, naming the last cycle's age and this bound) when its engine loop has completed no cycle (successful or not) for this long; a follower is always live (default: 3 engine intervals + cycle timeout)")
	fs.StringVar(&o.KedaScalerAddress, "keda-scaler-address", o.KedaScalerAddress,
		"Also serve the decisions as a KEDA external scaler (gRPC) on this address, e.g. :9090 (default: off)")
	fs.StringVar(&o.KedaScalerTLS.CertFile, "keda-scaler-tls-cert-file", o.KedaScalerTLS.CertFile,
		"PEM certificate of the KEDA external scaler's gRPC server (required with --keda-scaler-address unless --keda-scaler-insecure); re-read when it changes")
	fs.StringVar(&o.KedaScalerTLS.KeyFile, "keda-scaler-tls-key-file", o.KedaScalerTLS.KeyFile, "PEM private key of --keda-scaler-tls-cert-file (required with it); re-read when it changes")
	fs.StringVar(&o.KedaScalerTLS.ClientCAFile, "keda-scaler-client-ca-file", o.KedaScalerTLS.ClientCAFile,
		"Require KEDA to present a client certificate signed by this CA (mutual TLS; KEDA's tlsClientCert and tlsClientKey); re-read when it changes")
	fs.BoolVar(&o.KedaScalerInsecure, "keda-scaler-insecure", o.KedaScalerInsecure,
		"Serve the KEDA external scaler as plain gRPC, without TLS (an explicit opt-in): anyone who can reach the port reads every decision")
	fs.DurationVar(&o.KedaScalerResendInterval, "keda-scaler-resend-interval", o.KedaScalerResendInterval,
		"Longest silence on a KEDA StreamIsActive stream: activity is pushed on every change and re-sent at least this often")
}

// Complete fills in derived defaults.
func (o *Options) Complete() {
	if o.CycleTimeout == 0 {
		o.CycleTimeout = o.EngineInterval
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = o.StatusHeartbeat + 2*o.EngineInterval
	}
	if o.Lease.Namespace == "" {
		o.Lease.Namespace = o.ConfigNamespace
	}
	if o.ReadinessMaxCycleAge == 0 {
		o.ReadinessMaxCycleAge = 3 * o.EngineInterval
	}
	if o.LivenessStaleAfter == 0 {
		o.LivenessStaleAfter = 3*o.EngineInterval + o.CycleTimeout
	}
}

// Validate names the flag and value of every problem.
func (o *Options) Validate() error {
	var errs []error
	if o.PrometheusURL == "" {
		errs = append(errs, errors.New("--prometheus-url is required"))
	} else if u, err := url.Parse(o.PrometheusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--prometheus-url=%q: want an http(s) URL with a host", o.PrometheusURL))
	}
	if err := (collector.Labels{Namespace: o.PrometheusNamespaceLabel, Pod: o.PrometheusPodLabel}).Validate(); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"--engine-interval": o.EngineInterval, "--prometheus-timeout": o.PrometheusTimeout,
		"--status-heartbeat": o.StatusHeartbeat, "--keda-scaler-resend-interval": o.KedaScalerResendInterval} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must be positive", name, d))
		}
	}
	if o.LivenessStaleAfter < 0 {
		errs = append(errs, fmt.Errorf("--liveness-stale-after=%s: must be positive (0 or unset: 3 engine intervals + cycle timeout)", o.LivenessStaleAfter))
	}
	if o.KedaScalerAddress != "" {
		if _, port, err := net.SplitHostPort(o.KedaScalerAddress); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--keda-scaler-address=%q: want [host]:port, e.g. :9090", o.KedaScalerAddress))
		}
	}
	errs = append(errs, o.validateKedaTLS()...)
	errs = append(errs, o.Budget.Validate()...)
	if err := o.Endpoints.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (o *Options) validateKedaTLS() []error {
	t := o.KedaScalerTLS
	switch {
	case o.KedaScalerAddress == "" && (t != kedascaler.TLSFiles{} || o.KedaScalerInsecure):
		return []error{errors.New("--keda-scaler-tls-*, --keda-scaler-client-ca-file and --keda-scaler-insecure need --keda-scaler-address")}
	case o.KedaScalerAddress == "":
		return nil
	case o.KedaScalerInsecure && (t != kedascaler.TLSFiles{}):
		return []error{errors.New("--keda-scaler-insecure: plain gRPC excludes --keda-scaler-tls-cert-file, --keda-scaler-tls-key-file and --keda-scaler-client-ca-file")}
	case o.KedaScalerInsecure:
		return nil
	case t.CertFile == "" || t.KeyFile == "":
		return []error{fmt.Errorf("--keda-scaler-address=%s: set --keda-scaler-tls-cert-file and --keda-scaler-tls-key-file, or --keda-scaler-insecure for plain gRPC",
			o.KedaScalerAddress)}
	}
	return nil
}
