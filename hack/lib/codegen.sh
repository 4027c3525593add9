#!/usr/bin/env bash
# The WVA_* variables are read by the scripts that source this file.
# shellcheck disable=SC2034

# Shared by update-codegen.sh and verify-codegen.sh; source it, don't run it.
#
# The generators are pinned in hack/tools/go.mod (a separate module, so their
# dependencies never enter the main go.mod) and run with
# `go tool -modfile=...`, which caches the built binaries between runs:
#   - controller-gen (sigs.k8s.io/controller-tools): deepcopy and CRD.
#   - client-gen, lister-gen, informer-gen (k8s.io/code-generator): the typed
#     clientset, listers and shared informers under pkg/generated.
# All of them run from WVA_ROOT, so they load the API packages through the
# main module.

WVA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WVA_TOOLS_MODFILE="${WVA_ROOT}/hack/tools/go.mod"
WVA_BOILERPLATE="${WVA_ROOT}/hack/boilerplate.go.txt"
# Go module path of the main module.
WVA_MODULE="$(awk '$1 == "module" { print $2; exit }' "${WVA_ROOT}/go.mod")"

# Go package holding the API types (relative to WVA_ROOT).
WVA_API_PKG="./pkg/apis/llmd/v1alpha1"
# Checked-in outputs.
WVA_DEEPCOPY_DIR="${WVA_ROOT}/pkg/apis/llmd/v1alpha1"
WVA_DEEPCOPY_FILE="zz_generated.deepcopy.go"
WVA_CRD_DIR="${WVA_ROOT}/deploy/crd"
WVA_CRD_FILE="llmd.ai_variantautoscalings.yaml"
# The Helm chart carries a copy of the CRD (a chart cannot read files outside it).
WVA_CHART_CRD_DIR="${WVA_ROOT}/charts/wva/files"

# Typed client inputs: client-gen takes GROUP/VERSION directories below
# WVA_CLIENT_INPUT_BASE; lister-gen and informer-gen take the full package
# paths. List every API version carrying +genclient types here.
WVA_CLIENT_INPUT_BASE="${WVA_MODULE}/pkg/apis"
WVA_CLIENT_GROUP_VERSIONS=("llmd/v1alpha1")
# Typed client outputs: each of WVA_CLIENT_SUBDIRS below WVA_CLIENT_DIR is
# wholly generated (update-codegen.sh replaces it, verify-codegen.sh fails
# on any extra, missing or differing file in it); hand-written code in
# WVA_CLIENT_DIR goes beside them, never inside.
WVA_CLIENT_DIR="${WVA_ROOT}/pkg/generated"
WVA_CLIENT_PKG="${WVA_MODULE}/pkg/generated"
WVA_CLIENT_SUBDIRS=(clientset listers informers)

controller_gen() {
	(cd "${WVA_ROOT}" && GOWORK=off go tool -modfile="${WVA_TOOLS_MODFILE}" controller-gen "$@")
}

# codegen_tool NAME ARGS... runs a k8s.io/code-generator command.
codegen_tool() {
	local name="$1"
	shift
	(cd "${WVA_ROOT}" && GOWORK=off go tool -modfile="${WVA_TOOLS_MODFILE}" "${name}" "$@")
}

# codegen::generate DEEPCOPY_DIR CRD_DIR
# Writes zz_generated.deepcopy.go into DEEPCOPY_DIR and the CRD manifests
# into CRD_DIR. output:object:dir sends every package's deepcopy file to the
# one directory, which is right while WVA_API_PKG holds a single API
# version; give each new version its own controller-gen run.
codegen::generate() {
	local deepcopy_dir="$1" crd_dir="$2"
	mkdir -p "${deepcopy_dir}" "${crd_dir}"
	controller_gen \
		object:headerFile="${WVA_BOILERPLATE}" \
		output:object:dir="${deepcopy_dir}" \
		crd \
		output:crd:dir="${crd_dir}" \
		paths="${WVA_API_PKG}"
}

# codegen::generate_client OUT_DIR
# Writes the typed client into OUT_DIR/clientset/versioned (with fake/),
# OUT_DIR/listers and OUT_DIR/informers/externalversions. The generated
# code names its packages by WVA_CLIENT_PKG, so OUT_DIR may be any
# directory (verify-codegen.sh uses a temporary one). OUT_DIR's
# WVA_CLIENT_SUBDIRS must not exist yet: the generators only add files.
codegen::generate_client() {
	local out_dir="$1" gv
	local inputs=() pkgs=()
	for gv in "${WVA_CLIENT_GROUP_VERSIONS[@]}"; do
		inputs+=(--input "${gv}")
		pkgs+=("${WVA_CLIENT_INPUT_BASE}/${gv}")
	done
	mkdir -p "${out_dir}"

	codegen_tool client-gen \
		--go-header-file "${WVA_BOILERPLATE}" \
		--output-dir "${out_dir}/clientset" \
		--output-pkg "${WVA_CLIENT_PKG}/clientset" \
		--clientset-name versioned \
		--input-base "${WVA_CLIENT_INPUT_BASE}" \
		"${inputs[@]}"

	codegen_tool lister-gen \
		--go-header-file "${WVA_BOILERPLATE}" \
		--output-dir "${out_dir}/listers" \
		--output-pkg "${WVA_CLIENT_PKG}/listers" \
		"${pkgs[@]}"

	codegen_tool informer-gen \
		--go-header-file "${WVA_BOILERPLATE}" \
		--output-dir "${out_dir}/informers" \
		--output-pkg "${WVA_CLIENT_PKG}/informers" \
		--versioned-clientset-package "${WVA_CLIENT_PKG}/clientset/versioned" \
		--listers-package "${WVA_CLIENT_PKG}/listers" \
		"${pkgs[@]}"
}
