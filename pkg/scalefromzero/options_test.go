package scalefromzero

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"selector mode", func(o *Options) { o.EPPSelector = "app.kubernetes.io/component=epp" }, ""},
		{"static URLs", func(o *Options) { o.EPPURLs = []string{"http://127.0.0.1:9090/metrics"} }, ""},
		{"activator only", func(o *Options) {
			o.ActivatorListen, o.ActivatorBackends = ":8000", []string{"meta/llama=http://llama:8000"}
		}, ""},
		{"InferencePool discovery", func(*Options) {}, ""},
		{"both EPP modes", func(o *Options) { o.EPPSelector, o.EPPURLs = "a=b", []string{"http://x/metrics"} }, "choose one way to find EPPs"},
		{"bad selector", func(o *Options) { o.EPPSelector = "a in (" }, `--epp-selector="a in ("`},
		{"bad URL", func(o *Options) { o.EPPURLs = []string{"tcp://127.0.0.1:9090"} }, `--epp-url="tcp://127.0.0.1:9090": want an http(s) URL with a host`},
		{"zero interval", func(o *Options) { o.EPPSelector, o.PollInterval = "a=b", 0 }, "--poll-interval=0s: must be positive"},
		{"bad path", func(o *Options) { o.EPPSelector, o.EPPMetricsPath = "a=b", "metrics" }, `--epp-metrics-path="metrics": must start with /`},
		{"refuse unbudgeted", func(o *Options) { o.EPPSelector, o.Budget.Unbudgeted = "a=b", "refuse" }, ""},
		{"bad unbudgeted policy", func(o *Options) { o.EPPSelector, o.Budget.Unbudgeted = "a=b", "deny" }, `--unbudgeted-variants="deny": want unlimited or refuse`},
		{"both budgets", func(o *Options) { o.EPPSelector, o.Budget.ConfigMap, o.Budget.PoolLabel = "a=b", "cm", "pool" }, "choose one budget source"},
		{"missing token file", func(o *Options) { o.EPPSelector, o.EPPBearerTokenFile = "a=b", "/nonexistent/token" }, "--epp-bearer-token-file"},
		{"CA file with http", func(o *Options) { o.EPPSelector, o.EPPCAFile = "a=b", "options_test.go" }, `--epp-ca-file="options_test.go": only used with --epp-scheme=https`},
		{"held bytes below body cap", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeldBytes = "a=b", 1<<20 }, "--activator-max-held-bytes=1048576: must be >= --activator-max-body-bytes (4194304)"},
		{"no held requests", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeldRequests = "a=b", 0 }, "--activator-max-held-requests=0: must be >= 1"},
		{"per-model share above the whole", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeldRequestsPerModel = "a=b", 101 },
			"--activator-max-held-requests-per-model=101: must be <= --activator-max-held-requests (100)"},
		{"per-model bytes below body cap", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeldBytesPerModel = "a=b", 1<<20 },
			"--activator-max-held-bytes-per-model=1048576: must be >= --activator-max-body-bytes (4194304)"},
		{"negative per-model share", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeldRequestsPerModel = "a=b", -1 }, "must be >= 0"},
		{"tiny header cap", func(o *Options) { o.EPPSelector, o.ActivatorMaxHeaderBytes = "a=b", 100 }, "--activator-max-header-bytes=100: must be >= 1024"},
		{"no connections", func(o *Options) { o.EPPSelector, o.ActivatorMaxConnections = "a=b", 0 }, "--activator-max-connections=0: must be >= 1"},
		{"relative path", func(o *Options) { o.EPPSelector, o.ActivatorPaths = "a=b", []string{"v1/completions"} }, `--activator-paths="v1/completions": want a plain path`},
		{"path with query", func(o *Options) { o.EPPSelector, o.ActivatorPaths = "a=b", []string{"/v1/completions?x=1"} }, `--activator-paths="/v1/completions?x=1"`},
		{"no paths", func(o *Options) { o.EPPSelector, o.ActivatorPaths = "a=b", nil }, "--activator-paths: empty"},
		{"extra path", func(o *Options) {
			o.EPPSelector, o.ActivatorPaths = "a=b", []string{"/v1/completions", "/v1/responses"}
		}, ""},
		{"activator without backends", func(o *Options) { o.ActivatorListen = ":8000" }, "needs at least one --activator-backend"},
		{"lease order", func(o *Options) { o.EPPSelector, o.Lease.Enabled, o.Lease.RenewDeadline = "a=b", true, time.Minute }, "leader election"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			tt.mutate(o)
			err := o.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestParseBackends(t *testing.T) {
	got, err := ParseBackends([]string{"meta/llama-3.1-8b=http://llama.prod.svc:8000", "odd=name=https://x/v"})
	require.NoError(t, err)
	assert.Equal(t, "http://llama.prod.svc:8000", got["meta/llama-3.1-8b"].String())
	assert.Equal(t, "https://x/v", got["odd=name"].String())
	for _, bad := range [][]string{{"no-url"}, {"=http://x"}, {"m=ftp://x"}, {"m=http://a", "m=http://b"}} {
		_, err := ParseBackends(bad)
		assert.Error(t, err, bad)
	}
}
