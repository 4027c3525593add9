package kedascaler

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// TLSFiles are the scaler's PEM files. Kubelet swaps a mounted Secret's
// files in place when cert-manager renews it, so they are re-read on change.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes clients (KEDA) present a certificate
	// this CA signed: mutual TLS.
	ClientCAFile string
}

// ServerTLS returns a TLS config serving the files' current contents until
// ctx ends. It reuses the generic API server's file watchers, the ones that
// reload the adapter's own serving certificate.
func ServerTLS(ctx context.Context, f TLSFiles) (*tls.Config, error) {
	pair, err := dynamiccertificates.NewDynamicServingContentFromFiles("keda-scaler-serving", f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	go pair.Run(ctx, 1)
	var (
		mu      sync.Mutex
		lastPEM []byte
		last    *tls.Certificate
	)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Parse only when the watcher has loaded new bytes.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			certPEM, keyPEM := pair.CurrentCertKeyContent()
			mu.Lock()
			defer mu.Unlock()
			if last == nil || !bytes.Equal(certPEM, lastPEM) {
				c, err := tls.X509KeyPair(certPEM, keyPEM)
				if err != nil {
					return nil, err
				}
				lastPEM, last = certPEM, &c
			}
			return last, nil
		},
	}
	if f.ClientCAFile == "" {
		return cfg, nil
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("keda-scaler-client-ca", f.ClientCAFile)
	if err != nil {
		return nil, err
	}
	go ca.Run(ctx, 1)
	// The CA pool changes on reload, so verify by hand against the current
	// one (VerifyOptions asks for client-auth key usage).
	cfg.ClientAuth = tls.RequireAnyClientCert
	// A resumed session skips VerifyPeerCertificate: none, so a replaced CA
	// takes effect on every connection.
	cfg.SessionTicketsDisabled = true
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("no client certificate")
		}
		opts, ok := ca.VerifyOptions()
		if !ok {
			return errors.New("no client CA loaded")
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return fmt.Errorf("client certificate: %w", err)
			}
			certs = append(certs, c)
		}
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := certs[0].Verify(opts)
		return err
	}
	return cfg, nil
}
