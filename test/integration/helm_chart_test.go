package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// chartNamespace is the release namespace the chart renders into: deploy/'s.
const chartNamespace = "wva-system"

// helmAddedLabels are the labels the chart adds to every object's metadata
// beside deploy/'s (selectors and pod templates carry deploy/'s only).
var helmAddedLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

// chartOnlyAnnotations are the intentional differences from deploy/, by
// object key: the CRD outlives `helm uninstall`, which would otherwise
// delete every VariantAutoscaling with it (kubectl delete -k does too, but
// nobody runs that by accident on an upgrade).
var chartOnlyAnnotations = map[string][]string{
	"apiextensions.k8s.io/v1/CustomResourceDefinition /variantautoscalings.llmd.ai": {"helm.sh/resource-policy"},
}

// helmBin is the pinned helm; the chart tests fail without it.
func helmBin(t *testing.T) string {
	t.Helper()
	bin, err := harness.HelmBinary()
	require.NoError(t, err)
	return bin
}

func chartDir() string { return filepath.Join(repoRoot(), "charts", "wva") }

// helmTemplate runs `helm template` with --set values; it returns the
// objects, or the error with helm's stderr.
func helmTemplate(helm string, set ...string) ([]*unstructured.Unstructured, error) {
	// --kube-version: the cluster the tests run (helm built with `go
	// install` assumes v1.20 without a cluster, below the chart's kubeVersion).
	args := []string{"template", "wva", chartDir(), "--namespace", chartNamespace, "--kube-version", harness.KubernetesVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %v: %w: %s", args, err, stderr.String())
	}
	return testenv.ReadYAMLObjectsFrom(out)
}

func renderChart(t *testing.T, helm string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmTemplate(helm, set...)
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

// withoutHelmMetadata is a copy of objs without what the chart adds on
// purpose (helmAddedLabels, chartOnlyAnnotations); the test asserts each
// of those is present, so the list cannot outlive its reason.
func withoutHelmMetadata(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		dropRequired(t, o, "labels", helmAddedLabels)
		if drop, ok := chartOnlyAnnotations[objKey(o)]; ok {
			dropRequired(t, o, "annotations", drop)
		}
		out = append(out, o)
	}
	return out
}

// dropRequired deletes keys from o's metadata.<field> (labels or
// annotations), each of which must be there, and the map once empty.
func dropRequired(t *testing.T, o *unstructured.Unstructured, field string, keys []string) {
	t.Helper()
	m, _, err := unstructured.NestedStringMap(o.Object, "metadata", field)
	require.NoError(t, err)
	for _, k := range keys {
		require.Contains(t, m, k, "%s: %s %s", objKey(o), field, k)
		delete(m, k)
	}
	if len(m) == 0 {
		unstructured.RemoveNestedField(o.Object, "metadata", field)
		return
	}
	require.NoError(t, unstructured.SetNestedStringMap(o.Object, m, "metadata", field))
}

// without is objs less those whose key is among drop's or listed.
func without(objs []*unstructured.Unstructured, drop []*unstructured.Unstructured, keys ...string) []*unstructured.Unstructured {
	gone := map[string]bool{}
	for _, o := range drop {
		gone[objKey(o)] = true
	}
	for _, k := range keys {
		gone[k] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !gone[objKey(o)] {
			out = append(out, o)
		}
	}
	return out
}

const namespaceKey = "v1/Namespace /" + chartNamespace

// TestHelmChart checks charts/wva with the pinned helm: it lints, renders
// the very objects of the kustomizations in deploy/ for the same settings
// (so the two cannot drift), rejects values its schema forbids, and every
// object it renders is accepted by a real kube-apiserver (server-side
// apply, strict field validation).
func TestHelmChart(t *testing.T) {
	t.Parallel()
	helm := helmBin(t)

	t.Run("lint", func(t *testing.T) {
		for _, set := range [][]string{nil, {"tls.mode=ca-bundle", "tls.caBundle=UkVQTEFDRSBXSVRIIGJhc2U2NCBDQSBQRU0="}} {
			args := []string{"lint", "--strict", chartDir(), "--kube-version", harness.KubernetesVersion}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			out, err := exec.Command(helm, args...).CombinedOutput()
			require.NoError(t, err, "helm %v:\n%s", args, out)
			require.Contains(t, string(out), "1 chart(s) linted, 0 chart(s) failed")
		}
	})

	// Each case: the chart with these values renders exactly want's
	// objects, field for field.
	caBundle := "tls.caBundle=UkVQTEFDRSBXSVRIIGJhc2U2NCBDQSBQRU0=" // deploy/ca-bundle's placeholder
	dirs := func(dirs ...string) func(t *testing.T) []*unstructured.Unstructured {
		return func(t *testing.T) []*unstructured.Unstructured {
			var objs []*unstructured.Unstructured
			for _, d := range dirs {
				objs = append(objs, render(t, d)...)
			}
			return objs
		}
	}
	const apiServiceKey = "apiregistration.k8s.io/v1/APIService /v1beta1.external.metrics.k8s.io"
	cases := []struct {
		name string
		set  []string
		want func(t *testing.T) []*unstructured.Unstructured
	}{
		// helm install --create-namespace makes the namespace.
		{"defaults are deploy/cert-manager without its Namespace", nil,
			func(t *testing.T) []*unstructured.Unstructured {
				return without(render(t, "deploy/cert-manager"), nil, namespaceKey)
			}},
		{"namespace.create", []string{"namespace.create=true"}, dirs("deploy/cert-manager")},
		{"own CA", []string{"namespace.create=true", "tls.mode=ca-bundle", caBundle}, dirs("deploy/ca-bundle")},
		{"monitoring and alerts", []string{"namespace.create=true", "monitoring.enabled=true", "monitoring.alerts.enabled=true"},
			dirs("deploy/cert-manager", "deploy/monitoring")},
		{"no scale-from-zero", []string{"namespace.create=true", "scaleFromZero.enabled=false"},
			func(t *testing.T) []*unstructured.Unstructured {
				return without(render(t, "deploy/cert-manager"), render(t, "deploy/scale-from-zero"))
			}},
		{"KEDA ScaledObjects", []string{"namespace.create=true", "output=scaledobject"}, dirs("deploy/keda")},
		// deploy/namespaced builds on deploy/default, which has no caBundle:
		// its APIService is deploy/ca-bundle's.
		{"namespaced", []string{"namespace.create=true", "watchNamespace=llm", "tls.mode=ca-bundle", caBundle},
			func(t *testing.T) []*unstructured.Unstructured {
				return append(without(render(t, "deploy/namespaced"), nil, apiServiceKey), find(t, render(t, "deploy/ca-bundle"), "APIService", "v1beta1.external.metrics.k8s.io"))
			}},
	}
	for _, c := range cases {
		t.Run("same objects as deploy/: "+c.name, func(t *testing.T) {
			got := withoutHelmMetadata(t, renderChart(t, helm, c.set...))
			require.Equal(t, canonical(t, c.want(t)), canonical(t, got))
		})
	}

	t.Run("values moved off deploy/'s", func(t *testing.T) {
		objs := renderChart(t, helm, "prometheus.url=http://prom.obs.svc:9090", "image.digest=sha256:"+fmt.Sprintf("%064d", 7),
			"adapter.replicas=3", "networkPolicy.prometheusNamespace=obs", "monitoring.enabled=true")
		adapter := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "wva-adapter"))
		assert.Equal(t, int32(3), *adapter.Spec.Replicas)
		c := adapter.Spec.Template.Spec.Containers[0]
		assert.Equal(t, "ghcr.io/wva-project/wva@sha256:"+fmt.Sprintf("%064d", 7), c.Image)
		assert.Contains(t, c.Args, "--prometheus-url=http://prom.obs.svc:9090")
		peers := fmt.Sprint(find(t, objs, "NetworkPolicy", "wva-adapter").Object["spec"])
		assert.Contains(t, peers, "kubernetes.io/metadata.name:obs")
		assert.NotContains(t, peers, "kubernetes.io/metadata.name:monitoring")
		// No vLLM PodMonitor when turned off.
		off := renderChart(t, helm, "monitoring.enabled=true", "monitoring.vllmPodMonitor=false")
		for _, o := range off {
			assert.False(t, o.GetKind() == "PodMonitor" && o.GetName() == "vllm", "vllm PodMonitor rendered")
		}
	})

	t.Run("schema rejects bad values", func(t *testing.T) {
		for _, c := range []struct{ set, want string }{
			{"adapter.replicas=two", "adapter/replicas"},
			{"adapter.replicas=-1", "adapter/replicas"},
			{"tls.mode=vault", "tls/mode"},
			{"tls.mode=ca-bundle", "caBundle"},
			{"image.tag=latest", "image/tag"},
			{"prometheus.url=prometheus:9090", "prometheus/url"},
			{"scaleFromZero.eppMetricsPort=70000", "eppMetricsPort"},
			{"adapter.extraArgs[0]=engine-interval=15s", "extraArgs"},
			{"adapter.resources.requests.cpu=lots", "cpu"},
			{"monitoring.enable=true", "enable"}, // a typo of monitoring.enabled
		} {
			_, err := helmTemplate(helm, c.set)
			require.Error(t, err, c.set)
			assert.Contains(t, err.Error(), "values don't meet the specifications of the schema", c.set)
			assert.Contains(t, err.Error(), c.want, c.set)
		}
	})

	t.Run("real kube-apiserver accepts every object", func(t *testing.T) {
		start := time.Now()
		cluster := harness.StartT(t, harness.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, crdFixtures(t)...)
		applier := mustApplier(t, cluster)
		n := 0
		createNamespace(ctx, t, cluster.Clientset(), "llm")
		createNamespace(ctx, t, cluster.Clientset(), "keda")
		createNamespace(ctx, t, cluster.Clientset(), "cert-manager")
		for _, set := range [][]string{
			{"namespace.create=true", "monitoring.enabled=true", "monitoring.alerts.enabled=true"},
			{"namespace.create=true", "tls.mode=ca-bundle", caBundle, "scaleFromZero.enabled=false", "watchNamespace=llm"},
			{"namespace.create=true", "output=scaledobject"},
		} {
			objs := renderChart(t, helm, set...)
			// The Namespace and the CRD for real, as helm orders them
			// first; the rest as a dry run.
			for _, o := range objs {
				if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
					require.NoError(t, applier.Apply(ctx, o, false), objKey(o))
				}
			}
			for _, o := range objs {
				require.NoError(t, applier.Apply(ctx, o, true), "%v: %s", set, objKey(o))
				n++
			}
		}
		t.Logf("%d chart objects accepted by server-side apply (%s incl. control plane start)", n, time.Since(start).Round(time.Millisecond))
	})
}
