package collector

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"k8s.io/client-go/transport"

	"github.com/wva-project/wva/pkg/tlsfiles"
)

// PrometheusOptions say how to reach the Prometheus HTTP API. They are the
// adapter's --prometheus-* flags, and errors name those flags.
type PrometheusOptions struct {
	// URL is the base URL of the Prometheus HTTP API.
	URL string
	// CAFile is a PEM bundle to verify Prometheus' TLS certificate; empty
	// uses the system roots.
	CAFile string
	// InsecureSkipVerify skips TLS verification (testing only).
	InsecureSkipVerify bool
	// BearerTokenFile, when set, is sent as a bearer token and re-read
	// periodically, so a rotated token is picked up.
	BearerTokenFile string
	// Timeout bounds each HTTP request; zero means none.
	Timeout time.Duration
}

// NewPrometheusAPI returns a Prometheus API client. Files are checked here,
// so a misconfigured adapter fails at start rather than on its first query.
func NewPrometheusAPI(o PrometheusOptions) (v1.API, error) {
	tlsCfg := &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // opt-in flag for testing
	if o.CAFile != "" {
		var err error
		if tlsCfg.RootCAs, err = tlsfiles.CAPool("--prometheus-ca-file", o.CAFile); err != nil {
			return nil, err
		}
	}
	var rt http.RoundTripper = &http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
	}
	if o.BearerTokenFile != "" {
		if _, err := os.Stat(o.BearerTokenFile); err != nil {
			return nil, fmt.Errorf("--prometheus-bearer-token-file: %w", err)
		}
		var err error
		if rt, err = transport.NewBearerAuthWithRefreshRoundTripper("", o.BearerTokenFile, rt); err != nil {
			return nil, fmt.Errorf("--prometheus-bearer-token-file: %w", err)
		}
	}
	client, err := promapi.NewClient(promapi.Config{Address: o.URL, Client: &http.Client{Transport: rt, Timeout: o.Timeout}})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	return v1.NewAPI(client), nil
}
