package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Pinned versions; they must match test/tools/go.mod and test/tools/build.sh.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.0"
)

// Binary names in a binary directory.
const (
	BinEtcd                  = "etcd"
	BinKubeAPIServer         = "kube-apiserver"
	BinKubeControllerManager = "kube-controller-manager"
	BinKubeScheduler         = "kube-scheduler"
)

// Environment variables read by the harness.
const (
	// EnvBinDir names a directory holding etcd, kube-apiserver,
	// kube-controller-manager and kube-scheduler. When set it is used as is
	// and nothing is built.
	EnvBinDir = "WVA_TEST_BIN_DIR"
	// EnvBinCache is the root of the build cache (default
	// $HOME/.cache/wva-test/bin); build.sh uses the same variable.
	EnvBinCache = "WVA_TEST_BIN_CACHE"
	// EnvNoBuild, when "1" or "true", makes the harness fail instead of
	// running test/tools/build.sh when the binaries are missing.
	EnvNoBuild = "WVA_TEST_NO_BUILD"
	// EnvPrometheus overrides the prometheus binary (default: prometheus on
	// PATH, then /usr/bin/prometheus).
	EnvPrometheus = "WVA_TEST_PROMETHEUS"
)

var allBinaries = []string{BinEtcd, BinKubeAPIServer, BinKubeControllerManager, BinKubeScheduler}

// DefaultBinDir is the directory build.sh fills:
// ${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}/k8s-<ver>-etcd-<ver>.
func DefaultBinDir() (string, error) {
	root, err := binCacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion), nil
}

// binCacheRoot is the build cache build.sh fills:
// ${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}.
func binCacheRoot() (string, error) {
	if root := os.Getenv(EnvBinCache); root != "" {
		return root, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("harness: no $HOME and no $%s: %w", EnvBinCache, err)
	}
	return filepath.Join(home, ".cache", "wva-test", "bin"), nil
}

func missingBinaries(dir string) []string {
	var missing []string
	for _, b := range allBinaries {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// BuildScript returns the path of test/tools/build.sh in this repository.
func BuildScript() (string, error) {
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "tools", "build.sh"))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "test", "tools", "build.sh"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("harness: cannot find test/tools/build.sh (run from inside the wva repository)")
}

var buildMu sync.Mutex

// EnsureBinaries returns a directory holding all four control-plane
// binaries. Order: $WVA_TEST_BIN_DIR (never built into), then the build
// cache, which is filled by running test/tools/build.sh unless
// $WVA_TEST_NO_BUILD is set. A cold build takes many minutes; its progress
// goes to stderr.
func EnsureBinaries(ctx context.Context) (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if m := missingBinaries(dir); len(m) > 0 {
			return "", fmt.Errorf("harness: $%s=%s lacks %s; build them with test/tools/build.sh "+
				"(and point $%s at the directory it prints) or unset $%s", EnvBinDir, dir, strings.Join(m, ", "), EnvBinDir, EnvBinDir)
		}
		return dir, nil
	}
	dir, err := DefaultBinDir()
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	m := missingBinaries(dir)
	if len(m) == 0 {
		return dir, nil
	}
	script, serr := BuildScript()
	if v := os.Getenv(EnvNoBuild); v == "1" || v == "true" || serr != nil {
		reason := "$" + EnvNoBuild + " is set"
		if serr != nil {
			reason = serr.Error()
		}
		return "", fmt.Errorf("harness: %s missing in %s (%s); build them once with `test/tools/build.sh` "+
			"(a cold build takes ~10 min on 2 cores) or set $%s", strings.Join(m, ", "), dir, reason, EnvBinDir)
	}
	fmt.Fprintf(os.Stderr, "harness: %s missing in %s; running %s "+
		"(a cold build takes ~10 min on 2 cores, longer than go test's default -timeout: "+
		"better run build.sh once by hand or as its own CI step)\n", strings.Join(m, ", "), dir, script)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout = &out
	// Not os.Stderr itself: a build orphaned by a killed test binary must
	// not hold the test's output pipe open.
	cmd.Stderr = struct{ io.Writer }{os.Stderr}
	cmd.Env = append(os.Environ(), EnvBinCache+"="+filepath.Dir(dir))
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { signalGroup(cmd, true); return nil }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("harness: %s interrupted (%v) before the binaries were built; "+
				"run it once by hand (or raise go test -timeout), then run the tests again", script, context.Cause(ctx))
		}
		return "", fmt.Errorf("harness: %s failed: %w (run it by hand to see why)", script, err)
	}
	if m := missingBinaries(dir); len(m) > 0 {
		return "", fmt.Errorf("harness: %s ran but %s still missing in %s (it printed %q)", script, strings.Join(m, ", "), dir, strings.TrimSpace(out.String()))
	}
	return dir, nil
}
