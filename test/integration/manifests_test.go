package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// deployDirs and exampleDirs are every kustomization CI renders and
// applies (server-side dry run) on the real kube-apiserver.
var (
	deployDirs  = []string{"deploy/default", "deploy/cert-manager", "deploy/ca-bundle", "deploy/monitoring", "deploy/keda", "deploy/namespaced"}
	exampleDirs = []string{"examples/single-variant", "examples/two-variants", "examples/scale-to-zero",
		"examples/slo-analyzer", "examples/gpu-limited", "examples/keda"}
)

// crdFixtures are the third-party CRDs the overlays' objects need
// (testdata/crds/*.yaml say where each comes from).
func crdFixtures(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(repoRoot(), "test", "integration", "testdata", "crds", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

func objKey(o *unstructured.Unstructured) string { return testenv.ObjKey(o) }

func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.RenderKustomization(filepath.Join(repoRoot(), dir))
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

func renderDefault(t *testing.T) []*unstructured.Unstructured { return render(t, "deploy/default") }

// TestManifestsRender checks every kustomization without a cluster: it
// renders, equals `kubectl kustomize` object for object when kubectl is
// installed, has no wildcard verbs on core resources, and wva ConfigMap
// entries parse.
func TestManifestsRender(t *testing.T) {
	t.Parallel()
	kubectl, _ := exec.LookPath("kubectl")
	if kubectl == "" {
		t.Log("kubectl not on PATH: not cross-checking against kubectl kustomize")
	}
	for _, dir := range append(append([]string{}, deployDirs...), exampleDirs...) {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			if kubectl != "" {
				out, err := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot(), dir)).Output()
				require.NoError(t, err, "kubectl kustomize %s", dir)
				theirs, err := testenv.ReadYAMLObjectsFrom(out)
				require.NoError(t, err)
				require.Equal(t, canonical(t, theirs), canonical(t, objs), "testenv.RenderKustomization and kubectl kustomize disagree")
			}
			seen := map[string]bool{}
			for _, o := range objs {
				require.False(t, seen[objKey(o)], "duplicate object %s", objKey(o))
				seen[objKey(o)] = true
				checkRBAC(t, o)
				if o.GetKind() == "ConfigMap" && config.IsConfigMapName(o.GetName()) {
					data, _, err := unstructured.NestedStringMap(o.Object, "data")
					require.NoError(t, err)
					require.NoError(t, config.NewStore().Apply(o.GetName(), data), objKey(o))
				}
			}
		})
	}
}

// canonical is objects as JSON by key, so two renderings compare field for
// field whatever their order.
func canonical(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		require.NoError(t, err)
		out[objKey(o)] = string(b)
	}
	return out
}

func checkRBAC(t *testing.T, o *unstructured.Unstructured) {
	if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
		return
	}
	var r rbacv1.ClusterRole // Role and ClusterRole share rules
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
	for _, rule := range r.Rules {
		for _, g := range rule.APIGroups {
			if g != "" && g != "*" {
				continue
			}
			for _, v := range rule.Verbs {
				require.NotEqual(t, "*", v, "%s: wildcard verb on core resources %v", objKey(o), rule.Resources)
			}
		}
	}
}

// TestManifestsDefault checks deploy/default: least-privilege and hardened,
// and its ConfigMaps hold exactly the built-in defaults.
func TestManifestsDefault(t *testing.T) {
	t.Parallel()
	objs := renderDefault(t)
	var deployments []string
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
			deployments = append(deployments, d.Name)
			pod := d.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				where := fmt.Sprintf("%s container %s", objKey(o), c.Name)
				sc := c.SecurityContext
				require.NotNil(t, sc, where)
				require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", where)
				nonRoot := sc.RunAsNonRoot
				if nonRoot == nil && pod.SecurityContext != nil {
					nonRoot = pod.SecurityContext.RunAsNonRoot
				}
				require.True(t, nonRoot != nil && *nonRoot, "%s: runAsNonRoot", where)
				require.NotNil(t, sc.Capabilities, where)
				require.Contains(t, sc.Capabilities.Drop, corev1.Capability("ALL"), "%s: capabilities drop ALL", where)
				require.NotNil(t, c.ReadinessProbe, "%s: readiness probe", where)
				require.NotNil(t, c.LivenessProbe, "%s: liveness probe", where)
				require.False(t, c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero(), "%s: resource requests", where)
			}
		case "ConfigMap":
			if !config.IsConfigMapName(o.GetName()) {
				continue
			}
			data, _, err := unstructured.NestedStringMap(o.Object, "data")
			require.NoError(t, err)
			require.Contains(t, data, config.DefaultKey, objKey(o))
			store := config.NewStore()
			require.NoError(t, store.Apply(o.GetName(), data), objKey(o))
		}
	}
	sort.Strings(deployments)
	require.Equal(t, []string{"wva-adapter", "wva-controller", "wva-scale-from-zero"}, deployments)

	// The `default` entries spell out the built-in defaults field for field,
	// the analyzer (the slo-planner) included.
	store := config.NewStore()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && config.IsConfigMapName(o.GetName()) {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			require.NoError(t, store.Apply(o.GetName(), data))
		}
	}
	r := store.Resolve("any/model", "any-namespace")
	require.Equal(t, params.DefaultScaling(), r.Scaling)
	require.Equal(t, params.DefaultSLO(), r.SLO)
	require.Equal(t, params.AnalyzerSLOPlanner, r.Analyzer())
	require.Equal(t, params.DefaultScaleToZero(), r.ScaleToZero)
	require.NotEqual(t, "", r.SaturationSource)
}

// TestManifestsServerSideDryRun applies every object of every
// kustomization with a server-side dry run (strict field validation) against
// a real kube-apiserver. The CRDs (wva's and the third-party fixtures) and
// the namespaces the objects live in are created for real first.
func TestManifestsServerSideDryRun(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cluster := harness.StartT(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installCRD(ctx, t, cluster)
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, crdFixtures(t)...)
	applier, err := testenv.NewApplier(cluster.RESTConfig)
	require.NoError(t, err)

	created := map[string]bool{"default": true, "kube-system": true}
	var rejected []string
	n := 0
	kinds := map[string]int{}
	for _, dir := range append(append([]string{}, deployDirs...), exampleDirs...) {
		for _, o := range render(t, dir) {
			if ns := o.GetNamespace(); ns != "" && !created[ns] {
				createNamespace(ctx, t, cluster.Clientset(), ns)
				created[ns] = true
			}
			n++
			kinds[o.GetKind()]++
			if err := applier.Apply(ctx, o, true); err != nil {
				rejected = append(rejected, fmt.Sprintf("%s %s: %v", dir, objKey(o), err))
			}
		}
	}
	require.Empty(t, rejected, "objects rejected by the apiserver")
	// Three NetworkPolicies and the adapter's and controller's PDBs in each
	// of deploy/default and the four kustomizations built from it or like it.
	assert.GreaterOrEqual(t, kinds["NetworkPolicy"], 3*5, "NetworkPolicies dry-run applied")
	assert.GreaterOrEqual(t, kinds["PodDisruptionBudget"], 2*5, "PodDisruptionBudgets dry-run applied")
	t.Logf("%d objects of %d kustomizations accepted by server-side dry run (%s incl. control plane start)",
		n, len(deployDirs)+len(exampleDirs), time.Since(start).Round(time.Millisecond))

	t.Run("RBAC allows what each component needs and no more", func(t *testing.T) { checkPermissions(ctx, t, cluster) })
	t.Run("examples add ConfigMap entries beside deploy/default's", func(t *testing.T) { checkConfigMapMerge(ctx, t, cluster) })
}

// access is one request a ServiceAccount of deploy/ makes (or must not).
type access struct {
	verb, group, resource, subresource, namespace, name string
}

// checkPermissions applies deploy/default's RBAC for real and asks the API
// server (SubjectAccessReview) what each identity may do: everything the
// components call, nothing beyond their job.
func checkPermissions(ctx context.Context, t *testing.T, cluster *harness.Cluster) {
	cs := cluster.Clientset()
	applier, err := testenv.NewApplier(cluster.RESTConfig)
	require.NoError(t, err)
	for _, o := range testenv.RBACObjects(renderDefault(t)) {
		require.NoError(t, applier.Apply(ctx, o, false), objKey(o))
	}
	const va, vaStatus = "variantautoscalings", "status"
	cases := map[string]struct{ allowed, denied []access }{
		"wva-system:wva-adapter": {
			allowed: []access{{"list", "", "pods", "", "", ""}, {"watch", "apps", "deployments", "", "", ""}, {"watch", "llmd.ai", va, "", "", ""},
				{"update", "llmd.ai", va, vaStatus, "prod", "x"}, {"watch", "", "configmaps", "", "wva-system", ""},
				{"watch", "autoscaling", "horizontalpodautoscalers", "", "", ""}, // opt-in by annotations, read only
				{"watch", "inference.networking.k8s.io", "inferencepools", "", "", ""}, {"list", "inference.networking.k8s.io", "inferencepools", "", "", ""},
				{"update", "coordination.k8s.io", "leases", "", "wva-system", "wva-adapter"}, {"create", "", "events", "", "prod", ""},
				{"get", "", "configmaps", "", "kube-system", "extension-apiserver-authentication"},
				{"create", "authentication.k8s.io", "tokenreviews", "", "", ""}, {"create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""},
				// The persisted last valid configuration.
				{"create", "", "configmaps", "", "wva-system", ""}, {"update", "", "configmaps", "", "wva-system", "wva-last-good-config"},
				{"update", "", "configmaps", "", "wva-system", "wva-analyzer-state"}, {"update", "", "configmaps", "", "wva-system", "wva-optin-decisions"},
				// Namespace-local ConfigMaps, listed and watched by name.
				{"list", "", "configmaps", "", "prod", "wva-saturation-scaling-config"}, {"watch", "", "configmaps", "", "", "wva-queueing-model-config"},
				// pod-deletion-cost before a scale-down.
				{"patch", "", "pods", "", "prod", "x"},
				// Namespaces' GPU quotas.
				{"list", "", "resourcequotas", "", "", ""}, {"watch", "", "resourcequotas", "", "", ""}},
			denied: []access{{"get", "", "secrets", "", "wva-system", "x"}, {"list", "", "configmaps", "", "prod", ""}, {"get", "", "configmaps", "", "prod", "x"},
				{"update", "", "configmaps", "", "prod", "wva-saturation-scaling-config"},
				{"update", "", "configmaps", "", "wva-system", "wva-saturation-scaling-config"}, {"delete", "", "configmaps", "", "wva-system", "wva-last-good-config"},
				{"patch", "", "configmaps", "", "wva-system", "wva-last-good-config"}, {"create", "", "configmaps", "", "prod", ""},
				{"update", "apps", "deployments", "scale", "prod", "x"}, {"update", "llmd.ai", va, "", "prod", "x"},
				{"update", "autoscaling", "horizontalpodautoscalers", "", "prod", "x"}, {"delete", "", "pods", "", "prod", "x"}, {"update", "coordination.k8s.io", "leases", "", "prod", "x"},
				{"update", "", "pods", "", "prod", "x"}, {"patch", "", "pods", "status", "prod", "x"}, {"create", "", "pods", "eviction", "prod", "x"},
				{"update", "inference.networking.k8s.io", "inferencepools", "", "prod", "x"}, {"update", "inference.networking.k8s.io", "inferencepools", "status", "prod", "x"},
				{"get", "", "resourcequotas", "", "prod", "x"}, {"update", "", "resourcequotas", "", "prod", "x"}, {"update", "", "resourcequotas", "status", "prod", "x"}},
		},
		"wva-system:wva-controller": {
			allowed: []access{{"create", "autoscaling", "horizontalpodautoscalers", "", "prod", ""}, {"update", "apps", "deployments", "scale", "prod", "x"},
				{"update", "llmd.ai", va, vaStatus, "prod", "x"}, {"update", "coordination.k8s.io", "leases", "", "wva-system", "wva-controller"},
				{"create", "authentication.k8s.io", "tokenreviews", "", "", ""}, {"create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""}},
			denied: []access{{"list", "", "pods", "", "", ""}, {"get", "", "secrets", "", "prod", "x"}, {"update", "apps", "deployments", "", "prod", "x"},
				{"list", "", "configmaps", "", "wva-system", ""}},
		},
		"wva-system:wva-scale-from-zero": {
			allowed: []access{{"patch", "llmd.ai", va, "", "prod", "x"}, {"update", "apps", "deployments", "scale", "prod", "x"},
				{"list", "", "nodes", "", "", ""}, {"list", "", "pods", "", "", ""}, {"watch", "", "configmaps", "", "wva-system", ""},
				{"watch", "inference.networking.k8s.io", "inferencepools", "", "", ""},
				{"list", "", "resourcequotas", "", "", ""}, {"watch", "", "resourcequotas", "", "", ""},
				{"create", "authentication.k8s.io", "tokenreviews", "", "", ""}, {"create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""}},
			denied: []access{{"get", "", "secrets", "", "wva-system", "x"}, {"delete", "", "pods", "", "prod", "x"},
				{"update", "", "resourcequotas", "", "prod", "x"},
				{"update", "llmd.ai", va, vaStatus, "prod", "x"}, {"create", "autoscaling", "horizontalpodautoscalers", "", "prod", ""},
				{"patch", "inference.networking.k8s.io", "inferencepools", "", "prod", "x"}},
		},
		"kube-system:horizontal-pod-autoscaler": {
			allowed: []access{{"get", "external.metrics.k8s.io", "wva_desired_replicas", "", "prod", ""}},
		},
	}
	for sa, c := range cases {
		assertAccess(ctx, t, cs, sa, c.allowed, c.denied)
	}

	// /metrics: get only for those bound to wva-metrics-reader (here a
	// ServiceAccount bound as deploy/monitoring does), not for the components.
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-wva"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "wva-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "monitoring"}}}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	require.NoError(t, err)
	metricsAllowed := func(sa, verb string) bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + sa, Groups: []string{"system:authenticated"},
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: verb}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return sar.Status.Allowed
	}
	// The RBAC authorizer reads bindings from its informer: the one just
	// created reaches it shortly after the Create returns.
	testenv.Eventually(ctx, t, "the authorizer sees "+crb.Name, func() (bool, string) {
		return metricsAllowed("monitoring:prometheus", "get"), ""
	})
	for sa, want := range map[string]bool{"monitoring:prometheus": true, "wva-system:wva-adapter": false, "prod:default": false} {
		for _, verb := range []string{"get", "create"} {
			assert.Equal(t, want && verb == "get", metricsAllowed(sa, verb), "%s %s /metrics", sa, verb)
		}
	}
}

// assertAccess asks the API server (SubjectAccessReview) whether the
// ServiceAccount sa ("namespace:name") may make each request.
func assertAccess(ctx context.Context, t *testing.T, cs kubernetes.Interface, sa string, allowed, denied []access) {
	t.Helper()
	ns, _, _ := strings.Cut(sa, ":")
	user := "system:serviceaccount:" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	for want, list := range map[bool][]access{true: allowed, false: denied} {
		for _, a := range list {
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, sar.Status.Allowed, "%s %+v (allowed=%v, reason %q)", sa, a, sar.Status.Allowed, sar.Status.Reason)
		}
	}
}

// checkConfigMapMerge applies deploy/default's ConfigMaps, then each
// example's wva ConfigMap under another field manager, as
// `kubectl apply --server-side` would: the example's entries are added and
// the `default` entries stay.
func checkConfigMapMerge(ctx context.Context, t *testing.T, cluster *harness.Cluster) {
	base := mustApplier(t, cluster)
	base.FieldManager = "deploy-default"
	example := mustApplier(t, cluster)
	example.FieldManager = "example"
	for _, o := range renderDefault(t) {
		if o.GetKind() == "ConfigMap" {
			require.NoError(t, base.Apply(ctx, o, false), objKey(o))
		}
	}
	merged := 0
	for _, dir := range exampleDirs {
		for _, o := range render(t, dir) {
			if o.GetKind() != "ConfigMap" || !config.IsConfigMapName(o.GetName()) {
				continue
			}
			require.NoError(t, example.Apply(ctx, o, false), objKey(o))
			live, err := cluster.Clientset().CoreV1().ConfigMaps(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
			require.NoError(t, err)
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k := range data {
				require.Contains(t, live.Data, k, "%s: example entry", dir)
			}
			if o.GetName() != config.QueueingModelConfigMapName {
				require.Contains(t, live.Data, config.DefaultKey, "%s: deploy/default's entry must survive", dir)
			}
			merged++
		}
	}
	require.Equal(t, 3, merged, "examples with wva ConfigMap entries")
}

func mustApplier(t *testing.T, cluster *harness.Cluster) *testenv.Applier {
	a, err := testenv.NewApplier(cluster.RESTConfig)
	require.NoError(t, err)
	return a
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

// TestManifestsTLS checks that both TLS overlays verify the adapter: no
// insecureSkipTLSVerify; cert-manager injects the CA of a Certificate that
// issues the very Secret the adapter mounts, for the name the aggregator
// dials; the CA-bundle overlay sets a well-formed caBundle.
func TestManifestsTLS(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"deploy/default", "deploy/cert-manager", "deploy/ca-bundle"} {
		api := find(t, render(t, dir), "APIService", "v1beta1.external.metrics.k8s.io")
		_, found, _ := unstructured.NestedFieldNoCopy(api.Object, "spec", "insecureSkipTLSVerify")
		require.False(t, found, "%s: insecureSkipTLSVerify set", dir)
	}

	objs := render(t, "deploy/cert-manager")
	api := find(t, objs, "APIService", "v1beta1.external.metrics.k8s.io")
	from := api.GetAnnotations()["cert-manager.io/inject-ca-from"]
	ns, name, ok := strings.Cut(from, "/")
	require.True(t, ok, "inject-ca-from %q: want namespace/certificate", from)
	cert := find(t, objs, "Certificate", name)
	require.Equal(t, ns, cert.GetNamespace())
	svcNS, _, _ := unstructured.NestedString(api.Object, "spec", "service", "namespace")
	svcName, _, _ := unstructured.NestedString(api.Object, "spec", "service", "name")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	require.Contains(t, dnsNames, svcName+"."+svcNS+".svc", "the aggregator verifies <service>.<namespace>.svc")
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	var adapter appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", "wva-adapter").Object, &adapter))
	mounted := ""
	for _, v := range adapter.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted = v.Secret.SecretName
		}
	}
	require.Equal(t, secret, mounted, "the Certificate must issue the Secret the adapter mounts")
	require.Contains(t, strings.Join(adapter.Spec.Template.Spec.Containers[0].Args, " "), "--tls-cert-file=")
	// The serving Certificate is signed by a CA Issuer (stable caBundle), whose CA is self-signed.
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	caSecret, _, _ := unstructured.NestedString(find(t, objs, "Issuer", issuer).Object, "spec", "ca", "secretName")
	require.NotEmpty(t, caSecret, "Issuer %s: want a CA issuer", issuer)

	api = find(t, render(t, "deploy/ca-bundle"), "APIService", "v1beta1.external.metrics.k8s.io")
	bundle, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	_, err := base64.StdEncoding.DecodeString(bundle)
	require.NoError(t, err, "caBundle placeholder must be valid base64 so the overlay applies as shipped")
}

// TestManifestsMonitoring checks deploy/monitoring against deploy/default
// (selectors and ports that exist) and its alert rules with promtool.
func TestManifestsMonitoring(t *testing.T) {
	t.Parallel()
	objs := render(t, "deploy/monitoring")
	base := renderDefault(t)

	sm := find(t, objs, "ServiceMonitor", "wva-adapter")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := find(t, base, "Service", "wva-adapter")
	for k, v := range sel {
		require.Equal(t, v, svc.GetLabels()[k], "ServiceMonitor selector %s=%s must match Service wva-adapter", k, v)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Contains(t, fmt.Sprint(ports), "name:"+eps[0].(map[string]any)["port"].(string))
	require.Equal(t, true, eps[0].(map[string]any)["honorLabels"], "wva_* metrics carry the VA's namespace label")

	// Both monitors scrape over HTTPS with the token of the ServiceAccount
	// metrics-reader.yaml binds to deploy/default's wva-metrics-reader.
	pmEps, _, _ := unstructured.NestedSlice(find(t, objs, "PodMonitor", "wva-components").Object, "spec", "podMetricsEndpoints")
	for _, ep := range []any{eps[0], pmEps[0]} {
		e := ep.(map[string]any)
		require.Equal(t, "https", e["scheme"])
		secret, _, _ := unstructured.NestedString(e, "authorization", "credentials", "name")
		tokenSecret := find(t, objs, "Secret", secret)
		require.Equal(t, "kubernetes.io/service-account-token", tokenSecret.Object["type"])
		sa := tokenSecret.GetAnnotations()["kubernetes.io/service-account.name"]
		find(t, objs, "ServiceAccount", sa)
		crb := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "wva-metrics-reader"))
		require.Equal(t, rbacv1.Subject{Kind: "ServiceAccount", Name: sa, Namespace: tokenSecret.GetNamespace()}, crb.Subjects[0])
		find(t, base, "ClusterRole", crb.RoleRef.Name)
	}

	// The components PodMonitor reaches the controller's and the fast path's metrics ports.
	pm := find(t, objs, "PodMonitor", "wva-components")
	var want []string
	for _, o := range base {
		if o.GetKind() != "Deployment" || o.GetName() == "wva-adapter" {
			continue
		}
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
		lbls := d.Spec.Template.Labels
		want = append(want, lbls["app.kubernetes.io/component"])
		ports := map[string]bool{}
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = true
		}
		require.True(t, ports["metrics"], "%s: no container port named metrics", d.Name)
		// The kubelet probes the plain health port, not the authenticated metrics one.
		require.Equal(t, "health", d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port.StrVal, d.Name)
		require.True(t, ports["health"], "%s: no container port named health", d.Name)
	}
	exprs, _, _ := unstructured.NestedSlice(pm.Object, "spec", "selector", "matchExpressions")
	require.ElementsMatch(t, want, exprs[0].(map[string]any)["values"])

	// vLLM: the collector's default labels come from relabelings.
	vllm := find(t, objs, "PodMonitor", "vllm")
	relabel, _, _ := unstructured.NestedSlice(vllm.Object, "spec", "podMetricsEndpoints")
	targets := fmt.Sprint(relabel)
	require.Contains(t, targets, "targetLabel:namespace")
	require.Contains(t, targets, "targetLabel:pod")

	// promtool on the rule groups, as Prometheus would load them.
	promtool := promtoolBinary(t)
	rule := find(t, objs, "PrometheusRule", "wva")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "wva-rules.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), fmt.Sprintf("SUCCESS: %d rules found", len(alertNames(t, objs))))
}

// alertNames lists the alerts of deploy/monitoring's PrometheusRule.
func alertNames(t *testing.T, objs []*unstructured.Unstructured) []string {
	rule := find(t, objs, "PrometheusRule", "wva")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	var names []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			names = append(names, r.(map[string]any)["alert"].(string))
		}
	}
	sort.Strings(names)
	return names
}

// promtoolBinary is Debian's promtool (package prometheus), beside the
// prometheus server the harness uses.
func promtoolBinary(t *testing.T) string {
	if b, err := exec.LookPath("promtool"); err == nil {
		return b
	}
	prom, err := harness.PrometheusBinary()
	require.NoError(t, err)
	b := filepath.Join(filepath.Dir(prom), "promtool")
	_, err = os.Stat(b)
	require.NoError(t, err, "promtool: install Debian's prometheus package (hack/install-test-deps.sh)")
	return b
}
