package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const patchBase = `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: ns
data:
  keep: "1"
  drop: "2"
`

func writeKustomization(t *testing.T, patches string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(patchBase), 0o600); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml]\n" + patches
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The minimal renderer applies JSON 6902 patches like kustomize and refuses,
// loudly, what it does not implement rather than render something else.
func TestRenderKustomizationPatches(t *testing.T) {
	dir := writeKustomization(t, `patches:
  - target: {kind: ConfigMap, name: a}
    patch: |-
      - op: add
        path: /metadata/annotations
        value: {x/y: z}
      - op: replace
        path: /data/keep
        value: "3"
      - op: remove
        path: /data/drop
`)
	objs, err := RenderKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := objs[0].Object["data"].(map[string]any)
	if got := objs[0].GetAnnotations()["x/y"]; got != "z" || data["keep"] != "3" || data["drop"] != nil {
		t.Fatalf("patched object: annotations %v, data %v", objs[0].GetAnnotations(), data)
	}

	for name, tc := range map[string]struct{ patches, want string }{
		"target matches nothing": {"patches:\n  - target: {kind: Secret}\n    patch: '[{op: remove, path: /data}]'\n", "matches no object"},
		"strategic merge":        {"patches:\n  - target: {kind: ConfigMap}\n    patch: 'data: {keep: \"4\"}'\n", "only JSON 6902"},
		"replace missing field":  {"patches:\n  - target: {kind: ConfigMap}\n    patch: '[{op: replace, path: /data/none, value: x}]'\n", "no such field"},
		"list element":           {"patches:\n  - target: {kind: ConfigMap}\n    patch: '[{op: add, path: /items/0, value: x}]'\n", "not found"},
		"unknown field":          {"namePrefix: x-\n", "unknown field"},
		"list insert":            {"patches:\n  - target: {kind: ConfigMap}\n    patch: '[{op: add, path: /metadata/finalizers, value: [a]}, {op: add, path: /metadata/finalizers/0, value: b}]'\n", "only appending"},
		"delete names nothing":   {"patches:\n  - patch: '{kind: ConfigMap, metadata: {name: b}, $patch: delete}'\n", "no ConfigMap b"},
		"other $patch":           {"patches:\n  - patch: '{kind: ConfigMap, metadata: {name: a}, $patch: replace}'\n", "only delete"},
		"delete with fields":     {"patches:\n  - patch: '{kind: ConfigMap, metadata: {name: a}, data: {}, $patch: delete}'\n", "names an object"},
	} {
		_, err := RenderKustomization(writeKustomization(t, tc.patches))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// Overlays append to a container's args and drop a base's object
// (`$patch: delete`), as kustomize does.
func TestRenderKustomizationAppendAndDelete(t *testing.T) {
	dir := writeKustomization(t, `patches:
  - target: {kind: ConfigMap, name: a}
    patch: |-
      - op: add
        path: /metadata/finalizers
        value: [x]
      - op: add
        path: /metadata/finalizers/-
        value: w
`)
	objs, err := RenderKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].GetFinalizers(); strings.Join(got, ",") != "x,w" {
		t.Fatalf("finalizers %v, want [x w]", got)
	}

	dir = writeKustomization(t, `patches:
  - patch: |-
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: a
        namespace: ns
      $patch: delete
`)
	if objs, err = RenderKustomization(dir); err != nil || len(objs) != 0 {
		t.Fatalf("after $patch: delete: %d objects, err %v; want none", len(objs), err)
	}
}
