package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// HelmVersion must match test/tools/build.sh.
const HelmVersion = "v3.22.0"

// HelmBinary finds helm in the build cache (test/tools/build.sh installs
// it); the chart tests fail rather than skip without it.
func HelmBinary() (string, error) {
	root, err := binCacheRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "helm-"+HelmVersion, "helm")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("helm %s not found at %s: run test/tools/build.sh (or make test-deps), "+
			"which runs `GOBIN=%s go install helm.sh/helm/v3/cmd/helm@%s`", HelmVersion, bin, filepath.Dir(bin), HelmVersion)
	}
	return bin, nil
}
