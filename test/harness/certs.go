package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate and its ECDSA P-256 key.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

// newCA makes a self-signed CA.
func newCA(cn string) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, key, nil)
}

// sign signs tmpl for key with ca (self-signed if ca is nil).
func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, ca *keyPair) (*keyPair, error) {
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// issue makes a leaf certificate signed by ca. A cert with hosts is a
// serving cert, one with client set is a client cert (it may be both).
func (ca *keyPair) issue(cn string, orgs []string, dnsNames []string, ips []net.IP, client bool) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	if len(dnsNames) > 0 || len(ips) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return sign(tmpl, key, ca)
}

// write stores the pair as dir/name.crt and dir/name.key and returns the paths.
func (kp *keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, kp.certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, kp.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// pki is everything the control plane needs, written under dir.
type pki struct {
	ca, frontProxyCA              *keyPair
	caFile, frontProxyCAFile      string
	servingCert, servingKey       string
	adminCert, adminKey           string
	admin                         *keyPair
	frontProxyCert, frontProxyKey string
	saKeyFile, saPubFile          string
}

const (
	adminUser            = "wva-admin"
	frontProxyClientCN   = "front-proxy-client"
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

func newPKI(dir string, serviceIP net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{}
	var err error
	wrap := func(what string, err error) error { return fmt.Errorf("pki: %s: %w", what, err) }

	if p.ca, err = newCA("wva-test-ca"); err != nil {
		return nil, wrap("ca", err)
	}
	if p.caFile, _, err = p.ca.write(dir, "ca"); err != nil {
		return nil, wrap("ca", err)
	}
	if p.frontProxyCA, err = newCA("wva-test-front-proxy-ca"); err != nil {
		return nil, wrap("front-proxy ca", err)
	}
	if p.frontProxyCAFile, _, err = p.frontProxyCA.write(dir, "front-proxy-ca"); err != nil {
		return nil, wrap("front-proxy ca", err)
	}

	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if serviceIP != nil {
		ips = append(ips, serviceIP)
	}
	serving, err := p.ca.issue("kube-apiserver", nil, []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}, ips, false)
	if err != nil {
		return nil, wrap("apiserver serving cert", err)
	}
	if p.servingCert, p.servingKey, err = serving.write(dir, "apiserver"); err != nil {
		return nil, wrap("apiserver serving cert", err)
	}

	if p.admin, err = p.ca.issue(adminUser, []string{"system:masters"}, nil, nil, true); err != nil {
		return nil, wrap("admin cert", err)
	}
	if p.adminCert, p.adminKey, err = p.admin.write(dir, "admin"); err != nil {
		return nil, wrap("admin cert", err)
	}

	fp, err := p.frontProxyCA.issue(frontProxyClientCN, nil, nil, nil, true)
	if err != nil {
		return nil, wrap("front-proxy client cert", err)
	}
	if p.frontProxyCert, p.frontProxyKey, err = fp.write(dir, "front-proxy-client"); err != nil {
		return nil, wrap("front-proxy client cert", err)
	}

	saKey, err := newKey()
	if err != nil {
		return nil, wrap("service-account key", err)
	}
	saPEM, err := encodeKey(saKey)
	if err != nil {
		return nil, wrap("service-account key", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, wrap("service-account key", err)
	}
	p.saKeyFile = filepath.Join(dir, "sa.key")
	p.saPubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.saKeyFile, saPEM, 0o600); err != nil {
		return nil, wrap("service-account key", err)
	}
	if err := os.WriteFile(p.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, wrap("service-account key", err)
	}
	return p, nil
}
