#!/usr/bin/env bash
# Builds the pinned binaries used by test/harness:
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes)
#   etcd (go.etcd.io/etcd/server/v3)
# into ${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}/k8s-<ver>-etcd-<ver>/,
# kwok (fake nodes and pods for the e2e rig) into .../kwok-<ver>/ and helm
# (the chart tests) into .../helm-<ver>/.
# A binary that is already there is not rebuilt, so a warm run is instant.
# The last line printed on stdout is the control-plane binary directory.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0
KWOK_VERSION=v0.8.0
# helm is built from its own module at this tag, not from test/tools/go.mod:
# its Kubernetes libraries lag the control plane's and must not raise them.
HELM_VERSION=v3.22.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}
out="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
kwok_out="$cache/kwok-$KWOK_VERSION"
helm_out="$cache/helm-$HELM_VERSION"

# name -> Go main package (all from test/tools/go.mod)
declare -A pkgs=(
	[etcd]=go.etcd.io/etcd/server/v3
	[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
	[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
	[kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
	[kwok]=sigs.k8s.io/kwok/cmd/kwok
)
order=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm)

dest() {
	case "$1" in
	kwok) echo "$kwok_out/kwok" ;;
	helm) echo "$helm_out/helm" ;;
	*) echo "$out/$1" ;;
	esac
}

missing() {
	local m=()
	for b in "${order[@]}"; do
		[[ -x "$(dest "$b")" ]] || m+=("$b")
	done
	echo "${m[@]:-}"
}

mkdir -p "$out" "$kwok_out" "$helm_out"
if [[ -z "$(missing)" ]]; then
	echo "$out"
	exit 0
fi

# Serialise concurrent builders (e.g. several test packages at once).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$out/.lock"
	flock 9
	rm -rf "$out"/.build.* # left by a killed builder
fi

todo=$(missing)
if [[ -n "$todo" ]]; then
	cd "$here"
	# The build flags are go test's (cgo as the machine has it, no
	# -trimpath) and test/tools/go.mod requires the versions wva's go.mod
	# has of the modules both use: the packages the two share (std,
	# client-go, apiserver, grpc, ...) are then compiled once, by whichever
	# of `go vet`/`go test` and this build comes first. kwok is built from
	# this module too, so its Kubernetes libraries are the control plane's.
	export GOWORK=off
	# The versions here must match test/tools/go.mod.
	got_k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
	got_etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
	got_kwok=$(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
	if [[ "$got_k8s" != "$K8S_VERSION" || "$got_etcd" != "$ETCD_VERSION" || "$got_kwok" != "$KWOK_VERSION" ]]; then
		echo "build.sh: go.mod pins k8s $got_k8s / etcd $got_etcd / kwok $got_kwok but build.sh expects $K8S_VERSION / $ETCD_VERSION / $KWOK_VERSION" >&2
		exit 1
	fi
	minor=${K8S_VERSION#v1.}
	minor=${minor%%.*}
	vflags=""
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		vflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		vflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	tmp=$(mktemp -d "$out/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "build.sh: building $todo ($(date +%T))" >&2
	start=$SECONDS
	# One go build for all: shared packages compile once and the links
	# run side by side. -o dir/ names each binary as go does: the last
	# element of its package path, or the one before a major version
	# ("server" for go.etcd.io/etcd/server/v3).
	exec_name() {
		local base=${1##*/}
		if [[ "$base" =~ ^v[0-9]+$ ]]; then base=${1%/*} && base=${base##*/}; fi
		echo "$base"
	}
	main_pkgs=()
	for b in $todo; do
		if [[ "$b" != helm ]]; then main_pkgs+=("${pkgs[$b]}"); fi
	done
	if [[ ${#main_pkgs[@]} -gt 0 ]]; then
		go build -ldflags="-s -w$vflags" -o "$tmp/" "${main_pkgs[@]}"
	fi
	if [[ " $todo " == *" helm "* ]]; then
		# `go install pkg@version` builds helm with its own go.mod.
		GOBIN="$tmp" go install -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
			"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	fi
	for b in $todo; do
		name=helm
		if [[ "$b" != helm ]]; then name=$(exec_name "${pkgs[$b]}"); fi
		mv -f "$tmp/$name" "$(dest "$b")" # atomic: a partial build never looks finished
	done
	echo "build.sh: built $todo in $((SECONDS - start))s" >&2
fi
echo "$out"
