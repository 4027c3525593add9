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
	} {
		_, err := RenderKustomization(writeKustomization(t, tc.patches))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}
