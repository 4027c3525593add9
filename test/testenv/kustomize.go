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
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RenderKustomization renders dir (a directory with kustomization.yaml)
// with kustomize's own library, as `kubectl kustomize dir` does (default
// load restrictor, no build annotations) but keeping the resources' order,
// as listed, instead of kubectl's legacy sort by kind.
func RenderKustomization(dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	// Through YAML rather than each resource's Map() (Go ints, which
	// unstructured's DeepCopy rejects): objects decode as ReadYAMLObjects
	// decodes files.
	data, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return ReadYAMLObjectsFrom(data)
}

// ReadYAMLObjects splits a multi-document YAML file into objects.
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
