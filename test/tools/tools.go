//go:build tools

// Package tools pins the control-plane binaries and kwok used by the wva
// test harness.
// The blank imports keep `go mod tidy` from dropping the requirements; the
// binaries themselves are built by build.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
