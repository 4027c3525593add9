// Kustomize rendering and server-side apply of manifests, shared by the
// manifest checks and the e2e rig (which installs deploy/'s RBAC).
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// kustomization is the subset of kustomization.yaml the minimal renderer
// understands. sigs.k8s.io/kustomize/api is not a dependency of this module
// (it would pull kyaml and go-openapi for one test), so RenderKustomization
// implements what deploy/ and examples/ use: `resources:` (files and
// directories with a kustomization, recursively), `images:` and `patches:`
// in their JSON 6902 form (add may append to a list with "-"), plus the one
// strategic-merge patch `$patch: delete` that drops an object. Any other
// field (or strategic-merge patch) is an error, so a manifest change that
// needs real kustomize features fails here loudly.
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
	Patches []struct {
		Path   string `json:"path,omitempty"`
		Patch  string `json:"patch,omitempty"`
		Target struct {
			Group     string `json:"group,omitempty"`
			Version   string `json:"version,omitempty"`
			Kind      string `json:"kind,omitempty"`
			Name      string `json:"name,omitempty"`
			Namespace string `json:"namespace,omitempty"`
		} `json:"target"`
	} `json:"patches"`
}

// RenderKustomization renders dir (a directory with kustomization.yaml). Like kustomize's default load
// restrictor, a file resource must lie in or below its kustomization's
// directory; anything outside must be a directory with a kustomization.yaml.
func RenderKustomization(dir string) ([]*unstructured.Unstructured, error) {
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
			got, err = RenderKustomization(p)
		} else {
			rel, _ := filepath.Rel(dir, p)
			if strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("%s/kustomization.yaml: file resource %q is outside the kustomization root (kustomize rejects it; reference a directory with a kustomization.yaml)", dir, r)
			}
			got, err = ReadYAMLObjects(p)
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
	for i, p := range k.Patches {
		where := fmt.Sprintf("%s/kustomization.yaml: patches[%d]", dir, i)
		body := []byte(p.Patch)
		if p.Path != "" {
			if body, err = os.ReadFile(filepath.Join(dir, p.Path)); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		if del, ok, err := deletePatch(body); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		} else if ok {
			if objs, err = deleteObjects(objs, del, p.Target.Kind, p.Target.Name, p.Target.Namespace); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			continue
		}
		var ops []jsonPatchOp
		if err := yaml.UnmarshalStrict(body, &ops); err != nil {
			return nil, fmt.Errorf("%s: only JSON 6902 patches (a list of ops) are supported: %w", where, err)
		}
		tg, matched := p.Target, 0
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if (tg.Group != "" && tg.Group != gvk.Group) || (tg.Version != "" && tg.Version != gvk.Version) ||
				(tg.Kind != "" && tg.Kind != gvk.Kind) || (tg.Name != "" && tg.Name != o.GetName()) ||
				(tg.Namespace != "" && tg.Namespace != o.GetNamespace()) {
				continue
			}
			matched++
			for _, op := range ops {
				if err := op.apply(o.Object); err != nil {
					return nil, fmt.Errorf("%s on %s: %w", where, ObjKey(o), err)
				}
			}
		}
		if matched == 0 {
			return nil, fmt.Errorf("%s: target %+v matches no object", where, tg)
		}
	}
	return objs, nil
}

// deletePatch recognises a strategic-merge patch that is only an object's
// identity and `$patch: delete`, the way kustomize drops a base's object.
func deletePatch(body []byte) (*unstructured.Unstructured, bool, error) {
	var m map[string]any
	if err := yaml.Unmarshal(body, &m); err != nil || m["$patch"] == nil {
		return nil, false, nil // a list of JSON 6902 ops, or something the caller rejects
	}
	if m["$patch"] != "delete" {
		return nil, false, fmt.Errorf("$patch: %v: only delete is supported", m["$patch"])
	}
	for k := range m {
		if k != "$patch" && k != "apiVersion" && k != "kind" && k != "metadata" {
			return nil, false, fmt.Errorf("a $patch: delete patch names an object; %q is not supported", k)
		}
	}
	return &unstructured.Unstructured{Object: m}, true, nil
}

// deleteObjects drops the objects del (and the optional target) names;
// naming nothing is an error, as in kustomize.
func deleteObjects(objs []*unstructured.Unstructured, del *unstructured.Unstructured, kind, name, namespace string) ([]*unstructured.Unstructured, error) {
	if kind == "" {
		kind = del.GetKind()
	}
	if name == "" {
		name = del.GetName()
	}
	if namespace == "" {
		namespace = del.GetNamespace()
	}
	if kind == "" || name == "" {
		return nil, fmt.Errorf("$patch: delete needs a kind and a name")
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && (namespace == "" || o.GetNamespace() == namespace) {
			continue
		}
		out = append(out, o)
	}
	if len(out) == len(objs) {
		return nil, fmt.Errorf("$patch: delete: no %s %s", kind, name)
	}
	return out, nil
}

// jsonPatchOp is one RFC 6902 operation; add, replace and remove are what
// the overlays need.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func (op jsonPatchOp) apply(obj map[string]any) error {
	if !strings.HasPrefix(op.Path, "/") {
		return fmt.Errorf("path %q: must start with /", op.Path)
	}
	parts := strings.Split(op.Path[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	// Walk to the parent container.
	var parent any = obj
	for _, p := range parts[:len(parts)-1] {
		switch c := parent.(type) {
		case map[string]any:
			next, ok := c[p]
			if !ok {
				return fmt.Errorf("path %q: %q not found", op.Path, p)
			}
			parent = next
		case []any:
			idx, err := strconv.Atoi(p)
			if err != nil || idx < 0 || idx >= len(c) {
				return fmt.Errorf("path %q: bad index %q", op.Path, p)
			}
			parent = c[idx]
		default:
			return fmt.Errorf("path %q: %q is not a map or list", op.Path, p)
		}
	}
	last := parts[len(parts)-1]
	switch c := parent.(type) {
	case map[string]any:
		_, exists := c[last]
		switch op.Op {
		case "add":
			c[last] = op.Value
		case "replace":
			if !exists {
				return fmt.Errorf("replace %q: no such field", op.Path)
			}
			c[last] = op.Value
		case "remove":
			if !exists {
				return fmt.Errorf("remove %q: no such field", op.Path)
			}
			delete(c, last)
		default:
			return fmt.Errorf("op %q not supported (add, replace, remove)", op.Op)
		}
		return nil
	case []any:
		// Appending ("-") is what overlays do to args; the new slice must
		// be stored back in the list's own parent.
		if op.Op != "add" || last != "-" || len(parts) < 2 {
			return fmt.Errorf("path %q: only appending (add .../-) to a list is supported by the minimal renderer", op.Path)
		}
		return jsonPatchOp{Op: "replace", Path: "/" + strings.Join(escape(parts[:len(parts)-1]), "/"), Value: append(c, op.Value)}.apply(obj)
	default:
		return fmt.Errorf("path %q: parent is not a map", op.Path)
	}
}

// escape undoes the ~0/~1 decoding of JSON pointer tokens.
func escape(parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	return out
}

// readYAMLObjects splits a multi-document YAML file into objects.
func ReadYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := ReadYAMLObjectsFrom(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// ReadYAMLObjectsFrom splits multi-document YAML (or JSON) into objects.
func ReadYAMLObjectsFrom(data []byte) ([]*unstructured.Unstructured, error) {
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

// ObjKey names an object for messages: apiVersion/Kind namespace/name.
func ObjKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s %s/%s", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
}

// Applier server-side-applies objects (optionally as a dry run), finding
// each kind's resource through discovery.
type Applier struct {
	// FieldManager names the applier in managedFields ("wva-test" if empty).
	FieldManager string
	dyn          dynamic.Interface
	mapper       *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier returns an Applier for cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Apply server-side-applies o with strict field validation.
func (a *Applier) Apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	manager := a.FieldManager
	if manager == "" {
		manager = "wva-test"
	}
	return applyObject(ctx, a.dyn, a.mapper, o, manager, dryRun)
}

// ApplyDirT renders a kustomization and applies every object for real.
func ApplyDirT(ctx context.Context, t testing.TB, cfg *rest.Config, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := RenderKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := a.Apply(ctx, o, false); err != nil {
			t.Fatalf("apply %s: %v", ObjKey(o), err)
		}
	}
	return objs
}

func applyObject(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured, manager string, dryRun bool) error {
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
	opts := metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
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

// InstallCRDFiles creates the CRDs in files and waits until each is
// Established, so objects of their kinds validate.
func InstallCRDFiles(ctx context.Context, t testing.TB, cfg *rest.Config, files ...string) {
	t.Helper()
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		objs, err := ReadYAMLObjects(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := a.Apply(ctx, o, false); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			name := o.GetName()
			Eventually(ctx, t, "CRD "+name+" Established", func() (bool, string) {
				got, err := a.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				for _, c := range conds {
					if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
						return true, ""
					}
				}
				return false, fmt.Sprint(conds)
			})
		}
	}
}

// WriteKubeconfig writes cfg (host, CA and client certificate as data) as a
// kubeconfig file for a process's --kubeconfig flags.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// RBACObjects are the ServiceAccounts, Roles, ClusterRoles and their
// bindings among objs.
func RBACObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			out = append(out, o)
		}
	}
	return out
}
