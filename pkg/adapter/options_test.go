package adapter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsValidateKedaScaler(t *testing.T) {
	cases := []struct {
		name    string
		address string
		resend  time.Duration
		errText string
	}{
		{name: "off by default"},
		{name: "port only", address: ":9090"},
		{name: "host and port", address: "0.0.0.0:9090"},
		{name: "no port", address: "9090", errText: `--keda-scaler-address="9090": want [host]:port`},
		{name: "resend must be positive", address: ":9090", resend: -time.Second, errText: "--keda-scaler-resend-interval=-1s: must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.PrometheusURL = "http://prometheus:9090"
			o.KedaScalerAddress = tc.address
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
