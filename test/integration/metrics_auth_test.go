package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wva-project/wva/test/testenv"
)

// TestMetricsDelegatedAuth runs `wva controller` with its default secure
// /metrics against a real kube-apiserver: a ServiceAccount bound to
// deploy/default's wva-metrics-reader ClusterRole reads it, an unbound one
// is refused (403) and a request without a token is not authenticated (401).
func TestMetricsDelegatedAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, _ := startCluster(ctx, t, "wva-system", "monitoring")

	applier, err := testenv.NewApplier(cluster.RESTConfig)
	require.NoError(t, err)
	require.NoError(t, applier.Apply(ctx, find(t, renderDefault(t), "ClusterRole", "wva-metrics-reader"), false))
	token := map[string]string{}
	for _, sa := range []string{"prometheus", "stranger"} {
		_, err := cs.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := cs.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		token[sa] = tr.Status.Token
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-wva"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "wva-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "monitoring"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	p := startController(ctx, t, cluster, "--probe-namespace=wva-system", "--metrics-secure=true")
	metricsURL := "https://" + strings.TrimPrefix(p.MetricsURL, "http://") + "/metrics"
	// The certificate is self-signed in memory, as deploy/ runs it.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(bearer string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"invalid token", "not-a-token", http.StatusUnauthorized},
		{"unbound ServiceAccount", token["stranger"], http.StatusForbidden},
		{"ServiceAccount bound to wva-metrics-reader", token["prometheus"], http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := scrape(tc.token)
			assert.Equal(t, tc.want, code, body)
			assert.Equal(t, tc.want == http.StatusOK, strings.Contains(body, "# TYPE "), "metrics only for the reader: %.200s", body)
		})
	}
	t.Run("probes stay plain and open", func(t *testing.T) {
		assert.Equal(t, "ok", httpGet(ctx, t, p.HealthURL+"/healthz"))
		assert.Equal(t, "ok", httpGet(ctx, t, p.HealthURL+"/readyz"))
	})
}
