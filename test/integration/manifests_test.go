package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/test/harness"
)

// kustomization is the subset of kustomization.yaml the minimal renderer
// understands. sigs.k8s.io/kustomize/api is not a dependency of this module
// (it would pull kyaml and go-openapi for one test), so renderKustomization
// implements what deploy/ uses: `resources:` (files and directories with a
// kustomization, recursively) and `images:`. Any other field is an error, so a
// manifest change that needs real kustomize features fails here loudly.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images"`
}

// renderKustomization renders dir. Like kustomize's default load
// restrictor, a file resource must lie in or below its kustomization's
// directory; anything outside must be a directory with a kustomization.yaml.
func renderKustomization(dir string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: resource %q: %w", dir, r, err)
		}
		var got []*unstructured.Unstructured
		if st.IsDir() {
			got, err = renderKustomization(p)
		} else {
			rel, _ := filepath.Rel(dir, p)
			if strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("%s/kustomization.yaml: file resource %q is outside the kustomization root (kustomize rejects it; reference a directory with a kustomization.yaml)", dir, r)
			}
			got, err = readYAMLObjects(p)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	for _, img := range k.Images {
		for _, o := range objs {
			if err := setImage(o, img.Name, img.NewName, img.NewTag, img.Digest); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// readYAMLObjects splits a multi-document YAML file into objects.
func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := readYAMLObjectsFrom(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

func readYAMLObjectsFrom(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// setImage applies one kustomize `images:` entry to a workload's containers.
func setImage(o *unstructured.Unstructured, name, newName, newTag, digest string) error {
	for _, field := range []string{"containers", "initContainers"} {
		path := []string{"spec", "template", "spec", field}
		cs, found, err := unstructured.NestedSlice(o.Object, path...)
		if err != nil || !found {
			continue
		}
		for i, c := range cs {
			cm := c.(map[string]any)
			image, _ := cm["image"].(string)
			base, tag := image, ""
			if at := strings.Index(base, "@"); at >= 0 {
				base = base[:at]
			}
			if colon := strings.LastIndex(base, ":"); colon > strings.LastIndex(base, "/") {
				base, tag = base[:colon], base[colon+1:]
			}
			if base != name {
				continue
			}
			if newName != "" {
				base = newName
			}
			switch {
			case digest != "":
				image = base + "@" + digest
			case newTag != "":
				image = base + ":" + newTag
			case tag != "":
				image = base + ":" + tag
			default:
				image = base
			}
			cm["image"] = image
			cs[i] = cm
		}
		if err := unstructured.SetNestedSlice(o.Object, cs, path...); err != nil {
			return err
		}
	}
	return nil
}

func objKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s %s/%s", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
}

// TestManifestsRender checks deploy/default without a cluster: it renders,
// matches `kubectl kustomize` when kubectl is installed, is least-privilege
// and hardened, and its ConfigMaps hold exactly the built-in defaults.
func TestManifestsRender(t *testing.T) {
	objs := renderDefault(t)

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot(), "deploy", "default")).Output()
		require.NoError(t, err, "kubectl kustomize deploy/default")
		theirs, err := readYAMLObjectsFrom(out)
		require.NoError(t, err)
		require.ElementsMatch(t, keys(objs), keys(theirs), "minimal renderer and kubectl kustomize disagree")
	} else {
		t.Log("kubectl not on PATH: not cross-checking against kubectl kustomize")
	}

	seen := map[string]bool{}
	var deployments []string
	for _, o := range objs {
		require.False(t, seen[objKey(o)], "duplicate object %s", objKey(o))
		seen[objKey(o)] = true
		switch o.GetKind() {
		case "Role", "ClusterRole":
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

	// The `default` entries spell out the built-in defaults, field for field.
	store := config.NewStore()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && config.IsConfigMapName(o.GetName()) {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			require.NoError(t, store.Apply(o.GetName(), data))
		}
	}
	r := store.Resolve("any/model", "any-namespace")
	require.Equal(t, config.DefaultSaturation(), r.Saturation)
	require.Equal(t, config.DefaultScaleToZero(), r.ScaleToZero)
	require.NotEqual(t, "", r.SaturationSource)
}

// TestManifestsServerSideDryRun applies every rendered object with a
// server-side dry run against a real kube-apiserver. The Namespace and the
// CRD are created for real first, so namespaced objects and the CRD's own
// resources validate.
func TestManifestsServerSideDryRun(t *testing.T) {
	start := time.Now()
	objs := renderDefault(t)
	cluster := harness.StartT(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	installCRD(ctx, t, cluster)
	createNamespace(ctx, t, cluster.Clientset(), "wva-system")

	require.Empty(t, dryRunAll(ctx, t, cluster, objs), "objects rejected by the apiserver")
	t.Logf("%d objects accepted by server-side dry run (%s incl. control plane start)", len(objs), time.Since(start).Round(time.Millisecond))
}

// dryRunAll applies objs with a server-side dry run and lists the rejected
// ones with the API server's reasons.
func dryRunAll(ctx context.Context, t *testing.T, cluster *harness.Cluster, objs []*unstructured.Unstructured) []string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var rejected []string
	for _, o := range objs {
		if err := dryRunApply(ctx, dyn, mapper, o); err != nil {
			rejected = append(rejected, fmt.Sprintf("%s: %v", objKey(o), err))
		}
	}
	return rejected
}

func dryRunApply(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		mapper.Reset()
		if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return err
		}
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	// Strict: a field the schema does not know is an error, not pruned.
	opts := metav1.PatchOptions{FieldManager: "wva-manifests-test", Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		if o.GetNamespace() == "" {
			return fmt.Errorf("namespaced %s has no namespace", gvk.Kind)
		}
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts)
	return err
}

func renderDefault(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderKustomization(filepath.Join(repoRoot(), "deploy", "default"))
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

func keys(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, objKey(o))
	}
	return out
}
