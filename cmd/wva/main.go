// Command wva is the variant autoscaler: adapter, controller, scale-from-zero
// fast path, simulator and offline decision tool in one binary.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/wva-project/wva/cmd/wva/app"
)

func main() {
	// cli.Run adds klog flags, signal handling (context cancelled on
	// SIGTERM/SIGINT) and log flushing.
	os.Exit(cli.Run(app.NewRootCommand()))
}
