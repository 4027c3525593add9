package collector

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// promServer is a loopback TLS stand-in for Prometheus' query endpoint that
// records the Authorization headers it saw.
type promServer struct {
	mu   sync.Mutex
	auth []string
}

func (p *promServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"7"]}]}}`))
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestNewPrometheusAPI(t *testing.T) {
	ps := &promServer{}
	srv := httptest.NewTLSServer(ps)
	defer srv.Close()
	caFile := writeTemp(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	tokenFile := writeTemp(t, "token", "s3cret")
	missing := filepath.Join(t.TempDir(), "missing")

	tests := []struct {
		name    string
		opts    PrometheusOptions
		wantErr string // at construction
		// queryErr: the first query fails (TLS verification); else it
		// returns 7 with wantAuth sent.
		queryErr bool
		wantAuth string
	}{
		{name: "CA file and token", opts: PrometheusOptions{URL: srv.URL, CAFile: caFile, BearerTokenFile: tokenFile, Timeout: 5 * time.Second},
			wantAuth: "Bearer s3cret"},
		{name: "CA file, no token", opts: PrometheusOptions{URL: srv.URL, CAFile: caFile}},
		{name: "system roots do not trust the server", opts: PrometheusOptions{URL: srv.URL, Timeout: 5 * time.Second}, queryErr: true},
		{name: "insecure skip verify", opts: PrometheusOptions{URL: srv.URL, InsecureSkipVerify: true}},
		{name: "CA file missing", opts: PrometheusOptions{URL: srv.URL, CAFile: missing}, wantErr: "--prometheus-ca-file: open " + missing},
		{name: "CA file without PEM", opts: PrometheusOptions{URL: srv.URL, CAFile: tokenFile},
			wantErr: "--prometheus-ca-file=" + tokenFile + ": no PEM certificate found"},
		{name: "bad URL", opts: PrometheusOptions{URL: "http://prometheus:9090/%zz"}, wantErr: "--prometheus-url: "},
		{name: "token file missing", opts: PrometheusOptions{URL: srv.URL, CAFile: caFile, BearerTokenFile: missing},
			wantErr: "--prometheus-bearer-token-file: stat " + missing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, err := NewPrometheusAPI(tc.opts)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, api)
				return
			}
			require.NoError(t, err)
			ps.mu.Lock()
			ps.auth = nil
			ps.mu.Unlock()
			v, _, _, err := api.Query(context.Background(), "up", time.Unix(1, 0))
			if tc.queryErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "certificate")
				return
			}
			require.NoError(t, err)
			vec, ok := v.(model.Vector)
			require.True(t, ok, "got %T", v)
			require.Len(t, vec, 1)
			assert.Equal(t, model.SampleValue(7), vec[0].Value)
			ps.mu.Lock()
			defer ps.mu.Unlock()
			assert.Equal(t, []string{tc.wantAuth}, ps.auth)
		})
	}
}
