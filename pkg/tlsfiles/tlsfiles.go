// Package tlsfiles builds TLS configurations from PEM files. Serving
// certificates and client CAs are reloaded when the files change (kubelet
// swaps a mounted Secret's files in place when cert-manager renews it), with
// the generic API server's watchers, the ones that reload the adapter's own
// serving certificate.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// Serving returns a TLS config serving certFile and keyFile until ctx ends.
// A change is picked up when the files' watcher sees it, or at the latest on
// the watcher's restart a minute later; a pair that does not load (one file
// written, not the other yet) leaves the previous one served.
func Serving(ctx context.Context, purpose, certFile, keyFile string) (*tls.Config, error) {
	pair, err := dynamiccertificates.NewDynamicServingContentFromFiles(purpose, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	go pair.Run(ctx, 1)
	var (
		mu      sync.Mutex
		lastPEM []byte
		last    *tls.Certificate
	)
	return &tls.Config{
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
	}, nil
}

// RequireClientCert makes cfg accept only clients presenting a certificate
// that caFile's current CAs signed for client auth: mutual TLS. The CA file
// is reloaded like the serving pair until ctx ends.
func RequireClientCert(ctx context.Context, cfg *tls.Config, purpose, caFile string) error {
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile(purpose, caFile)
	if err != nil {
		return err
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
	return nil
}

// CAPool reads the PEM bundle path, which flag names, for a client to verify
// a server with; errors name the flag.
func CAPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s=%s: no PEM certificate found", flag, path)
	}
	return pool, nil
}
