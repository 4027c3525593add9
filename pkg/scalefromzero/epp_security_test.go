package scalefromzero

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/wva-project/wva/pkg/eppqueue"
)

// headerEPP records the Authorization header of every request it gets.
type headerEPP struct {
	mu    sync.Mutex
	auths []string
	// body is the metrics answer; newNameBody (queued requests) when empty.
	body string
}

func (h *headerEPP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auths = append(h.auths, r.Header.Get("Authorization"))
	body := h.body
	h.mu.Unlock()
	if body == "" {
		body = newNameBody
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(body))
}

func (h *headerEPP) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auths...)
}

// certFile writes the test server's certificate as a PEM CA bundle.
func certFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := t.TempDir() + "/ca.pem"
	require.NoError(t, writeFile(path, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))))
	return path
}

// otherCAFile writes a self-signed CA that signed nothing the servers use.
func otherCAFile(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	path := t.TempDir() + "/other-ca.pem"
	require.NoError(t, writeFile(path, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))))
	return path
}

func TestEPPClientSendsNoTokenByDefault(t *testing.T) {
	plain, tlsEPP := &headerEPP{}, &headerEPP{}
	plainSrv, tlsSrv := httptest.NewServer(plain), httptest.NewTLSServer(tlsEPP)
	defer plainSrv.Close()
	defer tlsSrv.Close()

	o := NewOptions()
	client, err := eppClient(o)
	require.NoError(t, err)
	res := NewScraper(client, time.Second, 1, nil).Scrape(context.Background(), plainSrv.URL)
	require.NoError(t, res.Err)

	o.EPPScheme, o.EPPCAFile = "https", certFile(t, tlsSrv)
	client, err = eppClient(o)
	require.NoError(t, err)
	res = NewScraper(client, time.Second, 1, nil).Scrape(context.Background(), tlsSrv.URL)
	require.NoError(t, res.Err)

	assert.Equal(t, []string{""}, plain.seen(), "no Authorization header over HTTP by default")
	assert.Equal(t, []string{""}, tlsEPP.seen(), "no Authorization header over HTTPS either unless a token file is given")
}

func TestEPPTokenOnlyOverVerifiedTLS(t *testing.T) {
	tokenFile := t.TempDir() + "/token"
	require.NoError(t, writeFile(tokenFile, "s3cret\n"))

	t.Run("verified certificate gets the token, re-read per request", func(t *testing.T) {
		epp := &headerEPP{}
		srv := httptest.NewTLSServer(epp)
		defer srv.Close()
		o := NewOptions()
		o.EPPScheme, o.EPPCAFile, o.EPPBearerTokenFile = "https", certFile(t, srv), tokenFile
		client, err := eppClient(o)
		require.NoError(t, err)
		s := NewScraper(client, time.Second, 1, nil)
		require.NoError(t, s.Scrape(context.Background(), srv.URL).Err)
		require.NoError(t, writeFile(tokenFile, "rotated\n")) // the kubelet rewrites the file in place
		require.NoError(t, s.Scrape(context.Background(), srv.URL).Err)
		assert.Equal(t, []string{"Bearer s3cret", "Bearer rotated"}, epp.seen())
		require.NoError(t, writeFile(tokenFile, "s3cret\n")) // for the subtests below
	})

	tests := []struct {
		name    string
		tls     bool
		caFile  func(t *testing.T, srv *httptest.Server) string
		wantErr string
	}{
		{name: "certificate from another CA", tls: true, caFile: func(t *testing.T, _ *httptest.Server) string { return otherCAFile(t) },
			wantErr: "certificate signed by unknown authority"},
		{name: "plain HTTP", caFile: func(t *testing.T, _ *httptest.Server) string { return otherCAFile(t) },
			wantErr: "refusing to send the --epp-bearer-token-file token over plain HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			epp := &headerEPP{}
			srv := httptest.NewUnstartedServer(epp)
			if tt.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			o := NewOptions()
			// Built directly: Validate would already refuse the plain-HTTP case.
			o.EPPCAFile, o.EPPBearerTokenFile = tt.caFile(t, srv), tokenFile
			client, err := eppClient(o)
			require.NoError(t, err)
			res := NewScraper(client, time.Second, 1, nil).Scrape(context.Background(), srv.URL)
			require.Error(t, res.Err)
			assert.Contains(t, res.Err.Error(), tt.wantErr)
			assert.Empty(t, epp.seen(), "the server never got a request, so never the token")
		})
	}

	t.Run("redirect is not followed", func(t *testing.T) {
		elsewhere := &headerEPP{}
		elsewhereSrv := httptest.NewTLSServer(elsewhere)
		defer elsewhereSrv.Close()
		srv := httptest.NewTLSServer(http.RedirectHandler(elsewhereSrv.URL+"/metrics", http.StatusFound))
		defer srv.Close()
		o := NewOptions()
		o.EPPScheme, o.EPPCAFile, o.EPPBearerTokenFile = "https", certFile(t, srv), tokenFile
		client, err := eppClient(o)
		require.NoError(t, err)
		res := NewScraper(client, time.Second, 1, nil).Scrape(context.Background(), srv.URL)
		require.Error(t, res.Err)
		assert.Empty(t, elsewhere.seen())
	})
}

func TestRunRefusesTokenOverHTTP(t *testing.T) {
	tokenFile := t.TempDir() + "/token"
	require.NoError(t, writeFile(tokenFile, "s3cret"))
	ca := otherCAFile(t)
	tests := []struct {
		name   string
		mutate func(*Options)
		want   []string
	}{
		{"token with the default http scheme", func(o *Options) { o.EPPSelector = "app=epp" },
			[]string{"--epp-bearer-token-file", "--epp-scheme=http", "--epp-scheme=https and --epp-ca-file"}},
		{"token with a plain-HTTP --epp-url", func(o *Options) { o.EPPURLs = []string{"https://a:9090/metrics", "http://b:9090/metrics"} },
			[]string{"--epp-bearer-token-file with a plain-HTTP --epp-url"}},
		{"token over https without a CA", func(o *Options) { o.EPPSelector, o.EPPScheme = "app=epp", "https" },
			[]string{"--epp-bearer-token-file needs --epp-ca-file"}},
		{"token with TLS verification off", func(o *Options) {
			o.EPPSelector, o.EPPScheme, o.EPPCAFile, o.EPPInsecureTLS = "app=epp", "https", ca, true
		}, []string{"--epp-insecure-skip-verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.Kubeconfig = "/nonexistent/kubeconfig" // never reached: flags are checked first
			o.EPPBearerTokenFile = tokenFile
			tt.mutate(o)
			err := Run(context.Background(), o)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "kubeconfig")
		})
	}

	o := NewOptions()
	o.EPPSelector, o.EPPScheme, o.EPPCAFile, o.EPPBearerTokenFile = "app=epp", "https", ca, tokenFile
	assert.NoError(t, o.Validate(), "https with a CA is the accepted way to send a token")
}

// TestTokenScrapesStayInTheGroupsNamespace: an EPP-labelled pod in a
// namespace without a group at zero is never contacted, so it never sees
// the token; the group's own EPP gets it over verified TLS.
func TestTokenScrapesStayInTheGroupsNamespace(t *testing.T) {
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln1.Addr().(*net.TCPAddr).Port
	ln2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		_ = ln1.Close()
		t.Skipf("127.0.0.2 not usable here: %v", err)
	}
	// Nothing queued at prod: the group stays at zero, so every tick
	// scrapes it (a woken group is no longer scraped, and when the fake
	// cluster shows the wake-up is a race).
	prodEPP, devEPP := &headerEPP{body: eppqueue.Metric + `{target_model_name="llama"} 0` + "\n"}, &headerEPP{}
	prodSrv, devSrv := httptest.NewUnstartedServer(prodEPP), httptest.NewUnstartedServer(devEPP)
	prodSrv.Listener, devSrv.Listener = ln1, ln2
	prodSrv.StartTLS()
	devSrv.StartTLS()
	defer prodSrv.Close()
	defer devSrv.Close()

	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	c.variant("dev", "l4", "llama", "5", 1, "", 1) // serving: dev is not scraped
	_ = c.pods.Add(eppPod("prod", "epp", "127.0.0.1", corev1.PodRunning))
	_ = c.pods.Add(eppPod("dev", "epp", "127.0.0.2", corev1.PodRunning))
	_ = c.pods.Add(eppPod("other", "epp", "127.0.0.2", corev1.PodRunning)) // no group at all

	tokenFile := t.TempDir() + "/token"
	require.NoError(t, writeFile(tokenFile, "s3cret"))
	o := NewOptions()
	// httptest's certificate names example.com, not 127.0.0.2.
	o.EPPSelector, o.EPPScheme, o.EPPMetricsPort = "app=epp", "https", port
	o.EPPCAFile, o.EPPTLSServerName, o.EPPBearerTokenFile = certFile(t, prodSrv), "example.com", tokenFile
	require.NoError(t, o.Validate())
	client, err := eppClient(o)
	require.NoError(t, err)

	f := newWakerFixture(c, false)
	scraped := make(chan ScrapeResult, 16)
	r := &Runner{State: f.waker.State, Waker: f.waker, Metrics: f.waker.Metrics, Interval: time.Hour,
		Endpoints: PodEndpoints{Pods: corelisters.NewPodLister(c.pods), Scheme: o.EPPScheme, Port: o.EPPMetricsPort, Path: o.EPPMetricsPath},
		Scraper:   NewScraper(client, time.Second, 4, func(res ScrapeResult, _ time.Duration) { scraped <- res })}
	// observe runs before the scrape leaves the in-flight set, and a tick
	// skips a URL still in flight: wait for it to leave before ticking.
	idle := func() bool {
		r.Scraper.mu.Lock()
		defer r.Scraper.mu.Unlock()
		return len(r.Scraper.inFlight) == 0
	}
	for range 3 {
		require.Eventually(t, idle, 10*time.Second, time.Millisecond, "the previous scrape is still in flight")
		r.Tick(context.Background())
		select {
		case res := <-scraped:
			require.NoError(t, res.Err)
			assert.Equal(t, "https://127.0.0.1:"+strconv.Itoa(port)+"/metrics", res.URL)
		case <-time.After(5 * time.Second):
			t.Fatal("prod's EPP was not scraped")
		}
	}
	assert.Equal(t, []string{"Bearer s3cret", "Bearer s3cret", "Bearer s3cret"}, prodEPP.seen())
	assert.Empty(t, devEPP.seen(), "EPP pods of namespaces without a group at zero are never contacted")
}
