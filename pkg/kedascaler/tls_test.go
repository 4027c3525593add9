package kedascaler

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/cache"

	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
	pb "github.com/wva-project/wva/pkg/kedascaler/externalscaler"
)

// testCA signs leaf certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf returns PEM certificate and key for 127.0.0.1 with the usage.
func (ca *testCA) leaf(t *testing.T, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// serveTLS runs the real server with ServerTLS on the files and returns its
// address.
func serveTLS(t *testing.T, files TLSFiles) string {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, idx.Add(va("prod", "llama", 2, true)))
	srv := New(llmdlisters.NewVariantAutoscalingLister(idx), time.Minute, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	srv.TLS, err = ServerTLS(ctx, files)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, lis) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return lis.Addr().String()
}

// call makes one IsActive call as KEDA would, over creds.
func call(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pb.NewExternalScalerClient(conn).IsActive(ctx, ref("llama", nil))
	if err == nil {
		assert.True(t, resp.GetResult())
	}
	return err
}

// clientTLS is what KEDA builds from caCert, tlsClientCert and tlsClientKey.
func clientTLS(t *testing.T, caPEM, certPEM, keyPEM []byte) credentials.TransportCredentials {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x509.NewCertPool()}
	if caPEM != nil {
		require.True(t, cfg.RootCAs.AppendCertsFromPEM(caPEM))
	}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg)
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "wva-ca"), newTestCA(t, "other-ca")
	srvCert, srvKey := ca.leaf(t, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := ca.leaf(t, x509.ExtKeyUsageClientAuth)
	strangerCert, strangerKey := other.leaf(t, x509.ExtKeyUsageClientAuth)
	files := TLSFiles{CertFile: writeFile(t, filepath.Join(dir, "tls.crt"), srvCert), KeyFile: writeFile(t, filepath.Join(dir, "tls.key"), srvKey)}
	serverOnly := serveTLS(t, files)
	files.ClientCAFile = writeFile(t, filepath.Join(dir, "ca.crt"), ca.pem)
	mutual := serveTLS(t, files)

	cases := []struct {
		name  string
		addr  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{"client trusting the CA", serverOnly, clientTLS(t, ca.pem, nil, nil), true},
		{"client without the CA", serverOnly, clientTLS(t, other.pem, nil, nil), false},
		{"plain gRPC client", serverOnly, insecure.NewCredentials(), false},
		{"mTLS: client certificate from the CA", mutual, clientTLS(t, ca.pem, cliCert, cliKey), true},
		{"mTLS: no client certificate", mutual, clientTLS(t, ca.pem, nil, nil), false},
		{"mTLS: client certificate from another CA", mutual, clientTLS(t, ca.pem, strangerCert, strangerKey), false},
		{"mTLS: serving certificate used as client certificate", mutual, clientTLS(t, ca.pem, srvCert, srvKey), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := call(t, tc.addr, tc.creds)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, codes.Unavailable, status.Code(err), "refused at the handshake, not by the scaler: %v", err)
		})
	}
}

// TestTLSReloadsRotatedCertificate: a renewed certificate (here from a new
// CA, so the change is visible) is served without a restart.
func TestTLSReloadsRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	cert, key := oldCA.leaf(t, x509.ExtKeyUsageServerAuth)
	files := TLSFiles{CertFile: writeFile(t, filepath.Join(dir, "tls.crt"), cert), KeyFile: writeFile(t, filepath.Join(dir, "tls.key"), key)}
	addr := serveTLS(t, files)
	require.NoError(t, call(t, addr, clientTLS(t, oldCA.pem, nil, nil)))

	cert, key = newCA.leaf(t, x509.ExtKeyUsageServerAuth)
	writeFile(t, files.KeyFile, key)
	writeFile(t, files.CertFile, cert)
	require.Eventually(t, func() bool { return call(t, addr, clientTLS(t, newCA.pem, nil, nil)) == nil }, 10*time.Second, 100*time.Millisecond)
	assert.Error(t, call(t, addr, clientTLS(t, oldCA.pem, nil, nil)))
}
