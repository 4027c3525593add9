package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/inferencepool"
	"github.com/wva-project/wva/pkg/scalefromzero"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// TestInferencePoolDiscovery: two InferencePools of the same name and
// selector in two namespaces, with a VA in each. Each VA's
// InferencePoolResolved condition names its own namespace's pool and EPP
// Service (a pool never selects another namespace's pods), a second pool
// selecting the same pods turns it into MultiplePools until deleted, and
// the EPP scale-from-zero resolves for each group is its own pool's.
func TestInferencePoolDiscovery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod", "dev")
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)

	assert.Nil(t, inferencepool.NewSource(cs, dyn, ""), "no InferencePool API: discovery off")
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, filepath.Join(repoRoot(), "test", "integration", "testdata", "inferencepool-crd.yaml"))

	pools := dyn.Resource(inferencepool.Resource)
	createPool := func(ns, name, app, epp string) {
		t.Helper()
		_, err := pools.Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"selector":          map[string]any{"matchLabels": map[string]any{"app": app}},
				"targetPorts":       []any{map[string]any{"number": int64(8000)}},
				"endpointPickerRef": map[string]any{"name": epp, "port": map[string]any{"number": int64(9002)}},
			},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createPool("prod", "llama", "llama", "llama-epp")
	createPool("prod", "mistral", "mistral", "mistral-epp")
	createPool("dev", "llama", "llama", "dev-llama-epp")

	const model = "meta/llama-3.1-8b"
	vllm, err := fakevllm.Start(false)
	require.NoError(t, err)
	t.Cleanup(vllm.Close)
	for _, ns := range []string{"prod", "dev"} {
		p := fakevllm.Pod{Namespace: ns, Name: "llama-0", Model: model}
		vllm.Set(p, 0.5, 0)
		vllm.Served(p, 10)
		servingVariant(ctx, t, cs, ns, "llama", 1, []string{"llama-0"})
		_, err = wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, newVA(ns, "llama", model, "5", 1, 4), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	prom := harness.StartPrometheusT(t, harness.PrometheusOptions{Config: vllm.ScrapeConfig("1s")})
	cert, key := adapterServingCert(t, cluster)
	startAdapter(ctx, t, cluster, prom.URL, cert, key)

	poolCondition := func(ns string, status metav1.ConditionStatus, reason string, contains ...string) func() (bool, string) {
		return func() (bool, string) {
			va, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, "llama", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(va.Status.Conditions, llmdv1alpha1.ConditionTypeInferencePoolResolved)
			if c == nil {
				return false, fmt_(va.Status.Conditions, nil)
			}
			ok := c.Status == status && c.Reason == reason
			for _, s := range contains {
				ok = ok && strings.Contains(c.Message, s)
			}
			return ok, c.Reason + ": " + c.Message
		}
	}
	testenv.Eventually(ctx, t, "prod's VA names prod's pool and EPP", poolCondition("prod", metav1.ConditionTrue, llmdv1alpha1.ReasonPoolFound,
		"InferencePool prod/llama (endpoint picker Service llama-epp.prod.svc:9002)"))
	testenv.Eventually(ctx, t, "dev's VA names dev's pool and EPP", poolCondition("dev", metav1.ConditionTrue, llmdv1alpha1.ReasonPoolFound,
		"InferencePool dev/llama (endpoint picker Service dev-llama-epp.dev.svc:9002)"))

	// A second pool selecting prod's pods: ambiguous, both named; dev's
	// VA is untouched.
	createPool("prod", "llama-canary", "llama", "canary-epp")
	testenv.Eventually(ctx, t, "prod's VA names both pools", poolCondition("prod", metav1.ConditionFalse, llmdv1alpha1.ReasonMultiplePools,
		"InferencePool prod/llama (", "InferencePool prod/llama-canary (endpoint picker Service canary-epp.prod.svc:9002)"))
	require.NoError(t, pools.Namespace("prod").Delete(ctx, "llama-canary", metav1.DeleteOptions{}))
	testenv.Eventually(ctx, t, "one pool again", poolCondition("prod", metav1.ConditionTrue, llmdv1alpha1.ReasonPoolFound, "prod/llama "))
	testenv.Eventually(ctx, t, "dev still its own pool", poolCondition("dev", metav1.ConditionTrue, llmdv1alpha1.ReasonPoolFound, "dev-llama-epp.dev.svc:9002"))

	// Removing dev's pool: no pool selects dev's pods.
	require.NoError(t, pools.Namespace("dev").Delete(ctx, "llama", metav1.DeleteOptions{}))
	testenv.Eventually(ctx, t, "dev has no pool", poolCondition("dev", metav1.ConditionFalse, llmdv1alpha1.ReasonNoPoolMatches))
	createPool("dev", "llama", "llama", "dev-llama-epp")

	// What scale-from-zero scrapes for each group, from the same informer
	// on the same API server: its own pool's EPP Service, metrics port.
	src := inferencepool.NewSource(cs, dyn, "")
	require.NotNil(t, src)
	src.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), src.HasSynced))
	eps := scalefromzero.PoolEndpoints{Pools: src, Scheme: "http", Port: 9090, Path: "/metrics"}
	llama := map[string]string{"app": "llama"}
	for ns, want := range map[string]string{"prod": "http://llama-epp.prod.svc:9090/metrics", "dev": "http://dev-llama-epp.dev.svc:9090/metrics"} {
		g := scalefromzero.Group{Key: scalefromzero.GroupKey{Namespace: ns, ModelID: model}, Variants: []scalefromzero.Variant{{Name: "llama", PodLabels: llama}}}
		testenv.Eventually(ctx, t, ns+"'s group scrapes its pool's EPP", func() (bool, string) {
			var got []string
			for _, ep := range eps.Endpoints(map[string]bool{"prod": true, "dev": true}) {
				if ep.Serves(g) {
					got = append(got, ep.URL)
				}
			}
			return len(got) == 1 && got[0] == want, fmt_(got, nil)
		})
	}
}
