package daemon

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/tlsfiles"
)

// DelegatingAuth asks the API server who a bearer token belongs to
// (TokenReview) and what they may do (SubjectAccessReview), with the
// caching and retries of a generic API server's delegated auth.
func DelegatingAuth(kube kubernetes.Interface) (authenticator.Request, authorizer.Authorizer, error) {
	// The generic API server's DefaultAuthWebhookRetryBackoff.
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
		CacheTTL:                 time.Minute,
	}.New()
	if err != nil {
		return nil, nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             time.Minute,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	return authn, authz, err
}

// WithAuthenticationAndAuthorization lets a request through to h only when
// authn knows its caller (else 401) and authz allows the caller the
// request's verb on its path as a nonResourceURL (else 403), as
// controller-runtime's filter and kube-rbac-proxy do.
func WithAuthenticationAndAuthorization(h http.Handler, authn authenticator.Request, authz authorizer.Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := authn.AuthenticateRequest(r)
		if err != nil || !ok {
			klog.V(4).InfoS("metrics request not authenticated", "remote", r.RemoteAddr, "err", err)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		decision, reason, err := authz.Authorize(r.Context(), attrs)
		if err != nil {
			klog.ErrorS(err, "metrics request authorization failed", "user", res.User.GetName())
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			klog.V(4).InfoS("metrics request forbidden", "user", res.User.GetName(), "reason", reason)
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// servingTLS serves certDir's tls.crt/tls.key, reloaded when either file
// changes (cert-manager renews in place) until ctx ends, or, with no
// certDir, a self-signed certificate generated now.
func servingTLS(ctx context.Context, certDir string) (*tls.Config, error) {
	if certDir != "" {
		return tlsfiles.Serving(ctx, "metrics-serving", filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	}
	host, _ := os.Hostname()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}
