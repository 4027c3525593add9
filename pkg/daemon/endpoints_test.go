package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	certutil "k8s.io/client-go/util/cert"
)

// tokens and readers stand in for the API server: who a token is, and who
// may get /metrics.
var (
	tokens  = map[string]string{"reader-token": "reader", "other-token": "other"}
	readers = map[string]bool{"reader": true}
)

// fakeAuth authenticates bearer tokens from tokens and allows readers to
// get the nonResourceURL /metrics, as TokenReview and SubjectAccessReview
// would with a metrics-reader ClusterRoleBinding.
func fakeAuth() (authenticator.Request, authorizer.Authorizer, error) {
	authn := bearertoken.New(authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
		name, ok := tokens[token]
		return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, ok, nil
	}))
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if readers[a.GetUser().GetName()] && a.GetVerb() == "get" && a.GetPath() == "/metrics" && !a.IsResourceRequest() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	})
	return authn, authz, nil
}

func TestWithAuthenticationAndAuthorization(t *testing.T) {
	authn, authz, _ := fakeAuth()
	h := WithAuthenticationAndAuthorization(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("wva_metric 1"))
	}), authn, authz)

	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
		{"unknown token", "Bearer forged", http.StatusUnauthorized},
		{"token without permission", "Bearer other-token", http.StatusForbidden},
		{"allowed", "Bearer reader-token", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.want, rec.Code, rec.Body.String())
			assert.Equal(t, tc.want == http.StatusOK, rec.Body.String() == "wva_metric 1", "metrics only behind auth")
		})
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var resp *http.Response
	for i := 0; i < 50; i++ { // the listeners start in Serve, serving in goroutines
		if resp, err = client.Do(req); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServeSecure runs Serve's default mode: /metrics over HTTPS with a
// self-signed certificate and delegated auth, probes on plain HTTP.
func TestServeSecure(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_test_gauge"}))
	e := DefaultEndpoints(freeAddr(t), freeAddr(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, serve(ctx, e, fakeAuth, reg, func() error { return nil }, nil))

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"other-token", http.StatusForbidden}, {"reader-token", http.StatusOK}} {
		code, body := get(t, insecure, "https://"+e.MetricsBindAddress+"/metrics", tc.token)
		assert.Equal(t, tc.want, code, "token %q: %s", tc.token, body)
		assert.Equal(t, tc.want == http.StatusOK, strings.Contains(body, "wva_test_gauge"), "token %q", tc.token)
	}
	code, _ := get(t, http.DefaultClient, "http://"+e.MetricsBindAddress+"/metrics", "reader-token")
	assert.Equal(t, http.StatusBadRequest, code, "no plain HTTP on the metrics port")
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, http.DefaultClient, "http://"+e.HealthProbeBindAddress+path, "")
		assert.Equal(t, http.StatusOK, code, path)
		assert.Equal(t, "ok", body, path)
	}
	code, _ = get(t, http.DefaultClient, "http://"+e.HealthProbeBindAddress+"/metrics", "")
	assert.Equal(t, http.StatusNotFound, code, "no metrics on the probe port")
}

// TestServeCertDir serves the certificate of --metrics-cert-dir, picks up a
// renewed one without a restart, and fails at start without one.
func TestServeCertDir(t *testing.T) {
	dir := t.TempDir()
	write := func(host string) {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600))
	}
	write("first.example")
	e := Endpoints{MetricsBindAddress: freeAddr(t), MetricsSecure: true, MetricsCertDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, serve(ctx, e, fakeAuth, prometheus.NewRegistry(), nil, nil))
	served := func() string {
		var name string
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error { name = cs.PeerCertificates[0].Subject.CommonName; return nil }}}}
		code, _ := get(t, client, "https://"+e.MetricsBindAddress+"/metrics", "reader-token")
		require.Equal(t, http.StatusOK, code)
		return name
	}
	assert.Contains(t, served(), "first.example")
	write("second.example")
	// The files' watcher reloads the pair asynchronously: served soon, not at once.
	require.Eventually(t, func() bool { return strings.Contains(served(), "second.example") }, 10*time.Second, 50*time.Millisecond)

	e.MetricsCertDir = t.TempDir()
	assert.ErrorContains(t, serve(ctx, e, fakeAuth, prometheus.NewRegistry(), nil, nil), "tls.crt")
}

func TestEndpointsFlags(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		wantAddress string
		wantErr     string
	}{
		{args: nil, wantAddress: ":8443"},
		{args: []string{"--metrics-secure=false"}, wantAddress: "127.0.0.1:8443"},
		{args: []string{"--metrics-secure=false", "--metrics-bind-address=0.0.0.0:8080"}, wantAddress: "0.0.0.0:8080"},
		{args: []string{"--metrics-bind-address=8443"}, wantErr: `--metrics-bind-address="8443": want [host]:port or 0`},
		{args: []string{"--health-probe-bind-address=x"}, wantErr: `--health-probe-bind-address="x"`},
		{args: []string{"--metrics-secure=false", "--metrics-cert-dir=/certs"}, wantErr: "only used with --metrics-secure"},
		{args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, wantAddress: "0"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			e := DefaultEndpoints(":8443", ":8081")
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			e.AddFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			if tc.wantErr != "" {
				assert.ErrorContains(t, e.Validate(), tc.wantErr)
				return
			}
			require.NoError(t, e.Validate())
			assert.Equal(t, tc.wantAddress, e.metricsAddress())
		})
	}
}

// TestServePlain is the local opt-out: plain HTTP, no token needed, never
// needing an API server.
func TestServePlain(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "wva_test_gauge"}))
	_, port, _ := net.SplitHostPort(freeAddr(t))
	e := Endpoints{MetricsBindAddress: ":" + port}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, Serve(ctx, e, nil, reg, nil, nil), "plain mode needs no API server")
	code, body := get(t, http.DefaultClient, "http://127.0.0.1:"+port+"/metrics", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "wva_test_gauge")

	e.MetricsSecure = true
	assert.ErrorContains(t, Serve(ctx, e, nil, reg, nil, nil), "no API server client", "never secure mode without auth")
}

// TestListenAndServe: plain or TLS by srv.TLSConfig, errors naming the flag,
// and the listener closed once ctx ends.
func TestListenAndServe(t *testing.T) {
	cfg, err := servingTLS(context.Background(), "")
	require.NoError(t, err)
	insecure := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		name   string
		tls    *tls.Config
		scheme string
	}{{"plain", nil, "http"}, {"tls", cfg, "https"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := &http.Server{TLSConfig: tc.tls, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hi")) })}
			addr, err := ListenAndServe(ctx, "--x-address", "127.0.0.1:0", srv, time.Second)
			require.NoError(t, err)
			code, body := get(t, insecure, tc.scheme+"://"+addr.String()+"/", "")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "hi", body)

			_, err = ListenAndServe(ctx, "--x-address", addr.String(), &http.Server{}, time.Second)
			assert.ErrorContains(t, err, "--x-address="+addr.String()+": ", "port in use")

			cancel()
			assert.Eventually(t, func() bool {
				c, err := net.Dial("tcp", addr.String())
				if err == nil {
					c.Close()
				}
				return err != nil
			}, 5*time.Second, 20*time.Millisecond, "closed when ctx ends")
		})
	}
}
