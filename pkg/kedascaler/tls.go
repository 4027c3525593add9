package kedascaler

import (
	"context"
	"crypto/tls"

	"github.com/wva-project/wva/pkg/tlsfiles"
)

// TLSFiles are the scaler's PEM files, re-read when they change.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes clients (KEDA) present a certificate
	// this CA signed: mutual TLS.
	ClientCAFile string
}

// ServerTLS returns a TLS config serving the files' current contents until
// ctx ends.
func ServerTLS(ctx context.Context, f TLSFiles) (*tls.Config, error) {
	cfg, err := tlsfiles.Serving(ctx, "keda-scaler-serving", f.CertFile, f.KeyFile)
	if err != nil || f.ClientCAFile == "" {
		return cfg, err
	}
	if err := tlsfiles.RequireClientCert(ctx, cfg, "keda-scaler-client-ca", f.ClientCAFile); err != nil {
		return nil, err
	}
	return cfg, nil
}
