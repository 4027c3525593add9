package testenv

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: ns
data:
  keep: "1"
  drop: "2"
`
	deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: c
          image: ghcr.io/wva-project/wva:dev
          args: [--a]
`
)

// writeKustomization writes cm.yaml and deploy.yaml and a kustomization of
// resources (both files if empty), followed by rest.
func writeKustomization(t *testing.T, resources, rest string) string {
	t.Helper()
	if resources == "" {
		resources = "[cm.yaml, deploy.yaml]"
	}
	dir := t.TempDir()
	files := map[string]string{
		"cm.yaml":            configMap,
		"deploy.yaml":        deployment,
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: " + resources + "\n" + rest,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// What deploy/'s overlays use renders as kustomize does, into objects that
// unstructured's helpers read (numbers as int64), in the listed order.
func TestRenderKustomization(t *testing.T) {
	for _, tc := range []struct {
		name, rest string
		check      func(t *testing.T, objs []*unstructured.Unstructured)
	}{{
		name: "resources in order, decoded as ReadYAMLObjects decodes files",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			want, err := ReadYAMLObjectsFrom([]byte(configMap + "---\n" + deployment))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(objs, want) {
				t.Fatalf("objects %v, want %v", objs, want)
			}
			objs[1].DeepCopy() // panics on values unstructured does not allow
		},
	}, {
		name: "JSON 6902 add, replace, remove, append",
		rest: `patches:
  - target: {kind: ConfigMap, name: a}
    patch: |-
      - {op: add, path: /metadata/annotations, value: {x/y: z}}
      - {op: replace, path: /data/keep, value: "3"}
      - {op: remove, path: /data/drop}
  - target: {kind: Deployment, name: d}
    patch: |-
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: --b}
`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			data, _, _ := unstructured.NestedStringMap(objs[0].Object, "data")
			if objs[0].GetAnnotations()["x/y"] != "z" || len(data) != 1 || data["keep"] != "3" {
				t.Fatalf("ConfigMap: annotations %v, data %v", objs[0].GetAnnotations(), data)
			}
			if got := args(t, objs[1]); got != "--a --b" {
				t.Fatalf("args %q, want --a --b", got)
			}
		},
	}, {
		name: "$patch: delete",
		rest: "patches:\n  - patch: '{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, $patch: delete}'\n",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if len(objs) != 1 || objs[0].GetKind() != "Deployment" {
				t.Fatalf("objects %v, want only the Deployment", keys(objs))
			}
		},
	}, {
		name: "images",
		rest: "images:\n  - {name: ghcr.io/wva-project/wva, newTag: v0.1.0}\n",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			cs, _, _ := unstructured.NestedSlice(objs[1].Object, "spec", "template", "spec", "containers")
			if got := cs[0].(map[string]any)["image"]; got != "ghcr.io/wva-project/wva:v0.1.0" {
				t.Fatalf("image %v", got)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := RenderKustomization(writeKustomization(t, "", tc.rest))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, objs)
		})
	}
}

// Mistakes in a kustomization fail the render rather than drop something.
func TestRenderKustomizationErrors(t *testing.T) {
	for _, tc := range []struct{ name, resources, rest, want string }{
		{name: "unknown field", rest: "namePrefixes: x-\n", want: "namePrefixes"},
		{name: "delete names nothing", rest: "patches:\n  - patch: '{apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: ns}, $patch: delete}'\n", want: "ConfigMap"},
		{name: "file outside the root", resources: "[cm.yaml, ../deploy.yaml]", want: "deploy.yaml"},
		{name: "missing patch file", rest: "patches:\n  - path: none.yaml\n", want: "none.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeKustomization(t, tc.resources, tc.rest)
			if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "deploy.yaml"), []byte(deployment), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := RenderKustomization(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, ObjKey(o))
	}
	return out
}

func args(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		t.Fatalf("containers: %v", err)
	}
	a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return strings.Join(a, " ")
}
