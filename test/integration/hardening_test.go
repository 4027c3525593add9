package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// workload is a pod template of a rendered object, with what the checks
// below need.
type workload struct {
	key       string
	namespace string
	replicas  int64
	pod       corev1.PodTemplateSpec
	component string // app.kubernetes.io/component of wva's own workloads
}

func workloads(t *testing.T, objs []*unstructured.Unstructured) []workload {
	var out []workload
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		default:
			continue
		}
		tmpl, found, err := unstructured.NestedMap(o.Object, "spec", "template")
		require.NoError(t, err, objKey(o))
		require.True(t, found, "%s: no pod template", objKey(o))
		var pod corev1.PodTemplateSpec
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod), objKey(o))
		replicas, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if !found {
			replicas = 1
		}
		w := workload{key: objKey(o), namespace: o.GetNamespace(), replicas: replicas, pod: pod}
		if pod.Labels["app.kubernetes.io/name"] == "wva" {
			w.component = pod.Labels["app.kubernetes.io/component"]
		}
		out = append(out, w)
	}
	return out
}

func selects(t *testing.T, sel *metav1.LabelSelector, pod corev1.PodTemplateSpec) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return !s.Empty() && s.Matches(labels.Set(pod.Labels))
}

// TestManifestsHardening holds every kustomization to deploy/'s rules:
// workloads with more than one replica have a PodDisruptionBudget; each wva
// component has a NetworkPolicy that selects its pods, isolates them both
// ways and admits each port they serve; every image is pinned (a tag other
// than latest, or a digest), wva's to one release per kustomization.
func TestManifestsHardening(t *testing.T) {
	t.Parallel()
	for _, dir := range append(append([]string{}, deployDirs...), exampleDirs...) {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			var pdbs []policyv1.PodDisruptionBudget
			var policies []networkingv1.NetworkPolicy
			for _, o := range objs {
				switch o.GetKind() {
				case "PodDisruptionBudget":
					pdbs = append(pdbs, *typed[policyv1.PodDisruptionBudget](t, o))
				case "NetworkPolicy":
					policies = append(policies, *typed[networkingv1.NetworkPolicy](t, o))
				}
			}
			wvaTags := map[string]bool{}
			for _, w := range workloads(t, objs) {
				if w.replicas > 1 {
					n := 0
					for _, p := range pdbs {
						if p.Namespace == w.namespace && selects(t, p.Spec.Selector, w.pod) {
							n++
						}
					}
					assert.Equal(t, 1, n, "%s: %d replicas, want one PodDisruptionBudget selecting its pods", w.key, w.replicas)
				}
				if w.component != "" {
					checkNetworkPolicy(t, w, policies)
				}
				for _, c := range append(append([]corev1.Container{}, w.pod.Spec.InitContainers...), w.pod.Spec.Containers...) {
					tag, pinned := imageTag(c.Image)
					assert.True(t, pinned, "%s container %s: image %q has no tag or digest", w.key, c.Name, c.Image)
					assert.NotEqual(t, "latest", tag, "%s container %s: image %q", w.key, c.Name, c.Image)
					if strings.HasPrefix(c.Image, "ghcr.io/wva-project/wva") {
						wvaTags[tag] = true
					}
				}
			}
			assert.LessOrEqual(t, len(wvaTags), 1, "wva images of one kustomization differ: %v", wvaTags)
		})
	}
}

// imageTag is an image reference's tag ("" with a digest) and whether the
// reference is pinned at all.
func imageTag(image string) (string, bool) {
	if strings.Contains(image, "@sha256:") {
		return "", true
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:], true
	}
	return "", false
}

// checkNetworkPolicy: exactly one policy selects w's pods, isolates
// ingress and egress, and admits every containerPort (else Prometheus, the
// aggregator or KEDA would be cut off).
func checkNetworkPolicy(t *testing.T, w workload, policies []networkingv1.NetworkPolicy) {
	t.Helper()
	var mine []networkingv1.NetworkPolicy
	for _, p := range policies {
		if p.Namespace == w.namespace && selects(t, &p.Spec.PodSelector, w.pod) {
			mine = append(mine, p)
		}
	}
	require.Len(t, mine, 1, "%s: want one NetworkPolicy selecting its pods", w.key)
	p := mine[0]
	assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes, p.Name)
	admitted := map[int32]bool{}
	for _, rule := range p.Spec.Ingress {
		for _, port := range rule.Ports {
			require.NotNil(t, port.Port, "%s: an ingress rule without a port admits every port", p.Name)
			admitted[port.Port.IntVal] = true
		}
	}
	for _, c := range w.pod.Spec.Containers {
		for _, cp := range c.Ports {
			assert.True(t, admitted[cp.ContainerPort], "%s: NetworkPolicy %s does not admit port %s (%d)", w.key, p.Name, cp.Name, cp.ContainerPort)
		}
	}
	for _, rule := range p.Spec.Egress {
		assert.NotEmpty(t, rule.Ports, "%s: an egress rule without ports allows everything", p.Name)
	}
}

// TestManifestsNamespacedRBAC applies deploy/namespaced's RBAC for real and
// asks the API server (SubjectAccessReview) what each component may do: its
// job in the watched namespace llm, nothing in another (prod) and nothing
// cluster-wide beyond the adapter's auth delegation.
func TestManifestsNamespacedRBAC(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cluster := harness.StartT(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := cluster.Clientset()
	objs := render(t, "deploy/namespaced")
	// Cluster-wide, only what must be: auth delegation (the aggregated API
	// server's, and every component's /metrics), the HPA controller's read
	// of external metrics, and get on the /metrics URL for Prometheus
	// (non-resource URLs exist only in ClusterRoles).
	for _, o := range objs {
		role := o.GetName()
		switch o.GetKind() {
		case "ClusterRoleBinding":
			role, _, _ = unstructured.NestedString(o.Object, "roleRef", "name")
		case "ClusterRole":
		default:
			continue
		}
		assert.Contains(t, []string{"wva-external-metrics-reader", "system:auth-delegator", "wva-metrics-reader"}, role, "deploy/namespaced keeps %s", objKey(o))
	}
	for _, ns := range []string{"wva-system", "llm", "prod"} {
		createNamespace(ctx, t, cs, ns)
	}
	applier := mustApplier(t, cluster)
	for _, o := range testenv.RBACObjects(objs) {
		require.NoError(t, applier.Apply(ctx, o, false), objKey(o))
	}
	const va = "variantautoscalings"
	in := func(verb, group, resource, sub, ns string) access { return access{verb, group, resource, sub, ns, ""} }
	cases := map[string]struct{ allowed, denied []access }{
		"wva-system:wva-controller": {
			allowed: []access{in("update", "apps", "deployments", "scale", "llm"), in("patch", "apps", "statefulsets", "scale", "llm"),
				in("create", "autoscaling", "horizontalpodautoscalers", "", "llm"), in("watch", "llmd.ai", va, "", "llm"),
				in("update", "llmd.ai", va, "status", "llm"), in("create", "", "events", "", "llm"),
				in("update", "coordination.k8s.io", "leases", "", "wva-system"), in("create", "", "events", "", "wva-system")},
			denied: []access{in("update", "apps", "deployments", "scale", "prod"), in("update", "apps", "deployments", "scale", ""),
				in("create", "autoscaling", "horizontalpodautoscalers", "", "prod"), in("watch", "llmd.ai", va, "", ""),
				in("update", "llmd.ai", va, "status", "prod"), in("create", "", "events", "", "prod")},
		},
		"wva-system:wva-adapter": {
			allowed: []access{in("list", "", "pods", "", "llm"), in("watch", "apps", "deployments", "", "llm"), in("update", "llmd.ai", va, "status", "llm"),
				in("watch", "", "configmaps", "", "wva-system"), in("create", "authentication.k8s.io", "tokenreviews", "", ""),
				in("create", "authorization.k8s.io", "subjectaccessreviews", "", ""), in("watch", "autoscaling", "horizontalpodautoscalers", "", "llm"),
				in("patch", "", "pods", "", "llm"), in("watch", "inference.networking.k8s.io", "inferencepools", "", "llm")},
			denied: []access{in("list", "", "pods", "", ""), in("list", "", "pods", "", "prod"), in("patch", "", "pods", "", "prod"), in("patch", "", "pods", "", ""), in("watch", "llmd.ai", va, "", "prod"),
				in("list", "", "nodes", "", ""), in("update", "apps", "deployments", "scale", "llm"),
				in("watch", "autoscaling", "horizontalpodautoscalers", "", "prod"), in("update", "autoscaling", "horizontalpodautoscalers", "", "llm"),
				in("watch", "inference.networking.k8s.io", "inferencepools", "", ""), in("update", "inference.networking.k8s.io", "inferencepools", "", "llm")},
		},
		"wva-system:wva-scale-from-zero": {
			allowed: []access{in("update", "apps", "deployments", "scale", "llm"), in("patch", "llmd.ai", va, "", "llm"), in("watch", "", "pods", "", "llm"),
				in("watch", "inference.networking.k8s.io", "inferencepools", "", "llm")},
			denied: []access{in("update", "apps", "deployments", "scale", "prod"), in("watch", "", "pods", "", ""), in("list", "", "nodes", "", ""),
				in("watch", "inference.networking.k8s.io", "inferencepools", "", "prod"),
				in("patch", "llmd.ai", va, "", "prod")},
		},
		"kube-system:horizontal-pod-autoscaler": {
			allowed: []access{in("get", "external.metrics.k8s.io", "wva_desired_replicas", "", "llm")},
		},
	}
	for sa, c := range cases {
		assertAccess(ctx, t, cs, sa, c.allowed, c.denied)
	}
	t.Logf("deploy/namespaced RBAC checked in %s incl. control plane start", time.Since(start).Round(time.Millisecond))
}
