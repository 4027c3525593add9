#!/usr/bin/env bash
# Builds the pinned control-plane binaries used by test/harness:
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes)
#   etcd (go.etcd.io/etcd/server/v3)
# into ${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}/k8s-<ver>-etcd-<ver>/.
# A binary that is already there is not rebuilt, so a warm run is instant.
# The last line printed on stdout is the binary directory.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0
# kwok (fake nodes and pods for the e2e rig) has no replace directives, so it
# is installed straight from the module proxy at a pinned version.
KWOK_VERSION=v0.8.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${WVA_TEST_BIN_CACHE:-$HOME/.cache/wva-test/bin}
out="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

# name -> Go main package
declare -A pkgs=(
	[etcd]=go.etcd.io/etcd/server/v3
	[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
	[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
	[kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
)
order=(etcd kube-apiserver kube-controller-manager kube-scheduler)

missing() {
	local m=()
	for b in "${order[@]}"; do
		[[ -x "$out/$b" ]] || m+=("$b")
	done
	echo "${m[@]:-}"
}

kwok_out="$cache/kwok-$KWOK_VERSION"
if [[ ! -x "$kwok_out/kwok" ]]; then
	echo "build.sh: installing kwok $KWOK_VERSION ($(date +%T))" >&2
	mkdir -p "$kwok_out"
	(cd / && GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN="$kwok_out" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
fi

mkdir -p "$out"
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
	export GOWORK=off CGO_ENABLED=0
	# The versions here must match test/tools/go.mod.
	got_k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
	got_etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
	if [[ "$got_k8s" != "$K8S_VERSION" || "$got_etcd" != "$ETCD_VERSION" ]]; then
		echo "build.sh: go.mod pins k8s $got_k8s / etcd $got_etcd but build.sh expects $K8S_VERSION / $ETCD_VERSION" >&2
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
	for b in $todo; do
		echo "build.sh: building $b ($(date +%T))" >&2
		start=$SECONDS
		go build -trimpath -ldflags="-s -w$vflags" -o "$tmp/$b" "${pkgs[$b]}"
		mv -f "$tmp/$b" "$out/$b" # atomic: a partial build never looks finished
		echo "build.sh: built $b in $((SECONDS - start))s" >&2
	done
fi
echo "$out"
