#!/usr/bin/env bash
# Installs what the real-component tests need, skipping what is present:
#   - Prometheus and promtool (manifest rule checks) from Debian's "prometheus" package
#   - kube-apiserver, kube-controller-manager, kube-scheduler and etcd built
#     from the Go module proxy at pinned versions into a cache (test/tools),
#     with kwok and helm (the chart tests)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v prometheus >/dev/null 2>&1; then
	sudo=""
	if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
	echo "installing Debian package prometheus" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# The Debian package starts a system service on install where systemd runs;
# tests start their own instances on free ports and never use it.

"${root}/test/tools/build.sh" >&2
