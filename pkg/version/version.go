// Package version holds build information, set with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
)

// Set at build time: -X github.com/wva-project/wva/pkg/version.Version=v0.1.0
var (
	Version = "dev"
	Commit  = "unknown"
)

// String is the one-line version of `wva version`.
func String() string {
	return fmt.Sprintf("wva %s (commit %s, %s, %s/%s)", Version, Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
