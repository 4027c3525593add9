package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Endpoints configures a component's two listeners: /metrics (HTTPS with
// delegated authentication and authorization unless MetricsSecure is off)
// and the plain-HTTP /healthz and /readyz the kubelet probes.
type Endpoints struct {
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS to callers whose bearer token
	// the API server accepts (TokenReview) and who may get the
	// nonResourceURL /metrics (SubjectAccessReview). Off: plain HTTP, bound
	// to 127.0.0.1 unless the address names a host.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key (re-read when they change);
	// empty: a self-signed certificate generated in memory.
	MetricsCertDir         string
	HealthProbeBindAddress string
}

// DefaultEndpoints serves secure /metrics on metrics and the probes on
// health.
func DefaultEndpoints(metrics, health string) Endpoints {
	return Endpoints{MetricsBindAddress: metrics, MetricsSecure: true, HealthProbeBindAddress: health}
}

// AddFlags registers --metrics-bind-address, --metrics-secure,
// --metrics-cert-dir and --health-probe-bind-address.
func (e *Endpoints) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&e.MetricsBindAddress, "metrics-bind-address", e.MetricsBindAddress,
		"Address of /metrics (\"0\" disables). HTTPS for callers allowed to get the nonResourceURL /metrics, unless --metrics-secure=false")
	fs.BoolVar(&e.MetricsSecure, "metrics-secure", e.MetricsSecure,
		"Serve /metrics over HTTPS with the API server's delegated authentication (TokenReview) and authorization (SubjectAccessReview); false: plain HTTP, on 127.0.0.1 unless --metrics-bind-address names a host")
	fs.StringVar(&e.MetricsCertDir, "metrics-cert-dir", e.MetricsCertDir,
		"Directory with tls.crt and tls.key for /metrics, re-read when they change (default: a self-signed certificate generated at start)")
	fs.StringVar(&e.HealthProbeBindAddress, "health-probe-bind-address", e.HealthProbeBindAddress,
		"Address of the plain-HTTP, unauthenticated /healthz and /readyz (\"0\" disables)")
}

// Validate checks the addresses.
func (e Endpoints) Validate() error {
	var errs []error
	for flag, addr := range map[string]string{"--metrics-bind-address": e.MetricsBindAddress, "--health-probe-bind-address": e.HealthProbeBindAddress} {
		if disabled(addr) {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want [host]:port or 0", flag, addr))
		}
	}
	if e.MetricsCertDir != "" && !e.MetricsSecure {
		errs = append(errs, fmt.Errorf("--metrics-cert-dir=%q: only used with --metrics-secure", e.MetricsCertDir))
	}
	return errors.Join(errs...)
}

func disabled(addr string) bool { return addr == "" || addr == "0" }

// metricsAddress is where /metrics listens: plain HTTP never binds every
// interface by default.
func (e Endpoints) metricsAddress() string {
	if host, port, err := net.SplitHostPort(e.MetricsBindAddress); err == nil && host == "" && !e.MetricsSecure {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return e.MetricsBindAddress
}

// Serve serves /metrics (from gatherer; access checked through kube, which
// may be nil when MetricsSecure is off) and the probes until ctx ends.
func Serve(ctx context.Context, e Endpoints, kube kubernetes.Interface, gatherer prometheus.Gatherer, ready, live func() error) error {
	auth := func() (authenticator.Request, authorizer.Authorizer, error) {
		if kube == nil {
			return nil, nil, errors.New("no API server client")
		}
		return DelegatingAuth(kube)
	}
	return serve(ctx, e, auth, gatherer, ready, live)
}

// serve is Serve with the authenticator and authorizer from auth.
func serve(ctx context.Context, e Endpoints, auth func() (authenticator.Request, authorizer.Authorizer, error),
	gatherer prometheus.Gatherer, ready, live func() error) error {
	if !disabled(e.MetricsBindAddress) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", MetricsHandler(gatherer))
		var handler http.Handler = mux
		var tlsCfg *tls.Config
		if e.MetricsSecure {
			authn, authz, err := auth()
			if err != nil {
				return fmt.Errorf("--metrics-secure: %w", err)
			}
			handler = WithAuthenticationAndAuthorization(mux, authn, authz)
			if tlsCfg, err = servingTLS(ctx, e.MetricsCertDir); err != nil {
				return fmt.Errorf("--metrics-cert-dir=%q: %w", e.MetricsCertDir, err)
			}
		}
		if err := listen(ctx, "--metrics-bind-address", e.metricsAddress(), handler, tlsCfg); err != nil {
			return err
		}
	}
	if !disabled(e.HealthProbeBindAddress) {
		if err := listen(ctx, "--health-probe-bind-address", e.HealthProbeBindAddress, ProbeHandler(ready, live), nil); err != nil {
			return err
		}
	}
	return nil
}

// listen serves handler on addr (TLS when tlsCfg is set) until ctx ends.
func listen(ctx context.Context, flag, addr string, handler http.Handler, tlsCfg *tls.Config) error {
	srv := &http.Server{Handler: handler, TLSConfig: tlsCfg, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	bound, err := ListenAndServe(ctx, flag, addr, srv, 2*time.Second)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	klog.InfoS("serving", "flag", flag, "url", scheme+"://"+bound.String())
	return nil
}

// ListenAndServe listens on addr and serves srv there (over TLS when
// srv.TLSConfig is set) until ctx ends, then gives requests in flight grace
// to finish. It returns once listening, with the bound address; errors name
// flag, the option that set addr.
func ListenAndServe(ctx context.Context, flag, addr string, srv *http.Server, grace time.Duration) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", flag, addr, err)
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}
