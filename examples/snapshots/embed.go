// Package snapshots ships example `wva decide` inputs; the scale-up example
// is embedded in the binary as the default snapshot.
package snapshots

import _ "embed"

// Default is the snapshot `wva decide` uses when no -f is given.
//
//go:embed scale-up.yaml
var Default []byte

// DefaultName names the embedded snapshot in messages.
const DefaultName = "examples/snapshots/scale-up.yaml (embedded)"
