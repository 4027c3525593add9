package adapter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/kedascaler"
)

func TestOptionsValidateKedaScaler(t *testing.T) {
	certKey := kedascaler.TLSFiles{CertFile: "tls.crt", KeyFile: "tls.key"}
	cases := []struct {
		name     string
		address  string
		resend   time.Duration
		tls      kedascaler.TLSFiles
		insecure bool
		errText  string
	}{
		{name: "off by default"},
		{name: "port only", address: ":9090", tls: certKey},
		{name: "host and port", address: "0.0.0.0:9090", tls: certKey},
		{name: "mutual TLS", address: ":9090", tls: kedascaler.TLSFiles{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}},
		{name: "plain gRPC by opt-in", address: ":9090", insecure: true},
		{name: "no port", address: "9090", tls: certKey, errText: `--keda-scaler-address="9090": want [host]:port`},
		{name: "resend must be positive", address: ":9090", tls: certKey, resend: -time.Second, errText: "--keda-scaler-resend-interval=-1s: must be positive"},
		{name: "no TLS without opt-in", address: ":9090", errText: "set --keda-scaler-tls-cert-file and --keda-scaler-tls-key-file, or --keda-scaler-insecure"},
		{name: "key without certificate", address: ":9090", tls: kedascaler.TLSFiles{KeyFile: "k"}, errText: "set --keda-scaler-tls-cert-file"},
		{name: "opt-in and TLS files", address: ":9090", tls: certKey, insecure: true, errText: "--keda-scaler-insecure: plain gRPC excludes"},
		{name: "TLS without the scaler", tls: certKey, errText: "need --keda-scaler-address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.PrometheusURL = "http://prometheus:9090"
			o.KedaScalerAddress = tc.address
			o.KedaScalerTLS, o.KedaScalerInsecure = tc.tls, tc.insecure
			if tc.resend != 0 {
				o.KedaScalerResendInterval = tc.resend
			}
			o.Complete()
			err := o.Validate()
			if tc.errText == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.errText)
		})
	}
}

func TestOptionsLivenessStaleAfter(t *testing.T) {
	cases := []struct {
		name    string
		set     time.Duration
		want    time.Duration
		errText string
	}{
		{name: "default: 3 intervals + cycle timeout (= interval)", want: 2 * time.Minute},
		{name: "explicit", set: 10 * time.Minute, want: 10 * time.Minute},
		{name: "negative", set: -time.Second, want: -time.Second, errText: "--liveness-stale-after=-1s: must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.PrometheusURL = "http://prometheus:9090"
			o.LivenessStaleAfter = tc.set
			o.Complete()
			assert.Equal(t, tc.want, o.LivenessStaleAfter)
			err := o.Validate()
			if tc.errText == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.errText)
		})
	}
}

func TestOptionsUnbudgetedVariants(t *testing.T) {
	cases := []struct {
		value   string
		errText string
	}{
		{value: "unlimited"},
		{value: "refuse"},
		{value: "Refuse", errText: `--unbudgeted-variants="Refuse": want unlimited or refuse`},
		{value: "", errText: `--unbudgeted-variants="": want unlimited or refuse`},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			o := NewOptions()
			o.PrometheusURL = "http://prometheus:9090"
			o.Budget.Unbudgeted = tc.value
			o.Complete()
			err := o.Validate()
			if tc.errText == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.errText)
		})
	}
	assert.Equal(t, "unlimited", NewOptions().Budget.Unbudgeted, "today's behaviour by default")
}
