package tlsfiles

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	require.NoError(t, err)
	return certPEM, keyPEM
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// servedName is the common name of the certificate cfg serves now.
func servedName(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	cert, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	return cert.Leaf.Subject.CommonName
}

// TestServingReloads: a renewed pair is served soon after it is written; a
// half-written rotation (new key, old certificate) keeps the old pair.
func TestServingReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	cert, key := selfSigned(t, "first.example")
	write(t, certFile, cert)
	write(t, keyFile, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := Serving(ctx, "test", certFile, keyFile)
	require.NoError(t, err)
	assert.Contains(t, servedName(t, cfg), "first.example")

	cert, key = selfSigned(t, "second.example")
	write(t, keyFile, key)
	time.Sleep(200 * time.Millisecond) // time for the watcher to try the mismatched pair
	assert.Contains(t, servedName(t, cfg), "first.example", "mid-rotation: the old pair")
	write(t, certFile, cert)
	require.Eventually(t, func() bool { return strings.Contains(servedName(t, cfg), "second.example") }, 10*time.Second, 20*time.Millisecond)

	_, err = Serving(ctx, "test", filepath.Join(t.TempDir(), "tls.crt"), keyFile)
	assert.ErrorContains(t, err, "tls.crt", "no certificate: fail at start")
}

func TestCAPool(t *testing.T) {
	dir := t.TempDir()
	caPEM, _ := selfSigned(t, "ca.example")
	good, notPEM := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	write(t, good, caPEM)
	write(t, notPEM, []byte("not a certificate"))
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"bundle", good, ""},
		{"missing file", missing, "--x-ca-file: open " + missing},
		{"no PEM in it", notPEM, "--x-ca-file=" + notPEM + ": no PEM certificate found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := CAPool("--x-ca-file", tc.path)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				assert.Nil(t, pool)
				return
			}
			require.NoError(t, err)
			assert.False(t, pool.Equal(nil), "the bundle's CA is in the pool")
		})
	}
}
