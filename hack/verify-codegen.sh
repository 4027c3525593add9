#!/usr/bin/env bash
# Checks that the checked-in generated files (deepcopy, CRD and the typed
# client under pkg/generated) match what hack/update-codegen.sh would
# produce now. Generates into a temporary directory (the working tree
# is not modified) and compares. Exits non-zero when anything is stale.
# Runnable from any directory.
set -euo pipefail

# shellcheck source=hack/lib/codegen.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/codegen.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

codegen::generate "${tmp}/deepcopy" "${tmp}/crd"
codegen::generate_client "${tmp}/client"

status=0
check() {
	local want="$1" got="$2" rel="${1#"${WVA_ROOT}/"}"
	if [[ ! -f "${want}" ]]; then
		echo "ERROR: ${rel} is missing." >&2
		status=1
	elif ! diff -u --label "${rel} (checked in)" --label "${rel} (generated)" "${want}" "${got}" >&2; then
		echo "ERROR: ${rel} is stale." >&2
		status=1
	fi
}

check "${WVA_DEEPCOPY_DIR}/${WVA_DEEPCOPY_FILE}" "${tmp}/deepcopy/${WVA_DEEPCOPY_FILE}"
check "${WVA_CRD_DIR}/${WVA_CRD_FILE}" "${tmp}/crd/${WVA_CRD_FILE}"
check "${WVA_CHART_CRD_DIR}/${WVA_CRD_FILE}" "${tmp}/crd/${WVA_CRD_FILE}"

# Generated outputs that are not checked in (e.g. a new CRD).
for f in "${tmp}"/crd/*; do
	if [[ ! -f "${WVA_CRD_DIR}/$(basename "${f}")" ]]; then
		echo "ERROR: ${WVA_CRD_DIR#"${WVA_ROOT}/"}/$(basename "${f}") is generated but not checked in." >&2
		status=1
	fi
done

# The typed client: every file of each generated subdirectory must match,
# and neither side may have a file the other lacks.
for sub in "${WVA_CLIENT_SUBDIRS[@]}"; do
	want="${WVA_CLIENT_DIR}/${sub}" got="${tmp}/client/${sub}"
	rel="${want#"${WVA_ROOT}/"}"
	if [[ ! -d "${got}" ]]; then
		if [[ -e "${want}" ]]; then
			echo "ERROR: ${rel} is checked in but no longer generated." >&2
			status=1
		fi
	elif [[ ! -d "${want}" ]]; then
		echo "ERROR: ${rel} is generated but not checked in." >&2
		status=1
	elif ! (cd "${WVA_CLIENT_DIR}" && diff -ruN "${sub}" "${got}") >&2; then
		echo "ERROR: ${rel} is stale (or hand-edited)." >&2
		status=1
	fi
done

if [[ "${status}" -ne 0 ]]; then
	echo "Generated files are out of date. Run hack/update-codegen.sh and commit the result." >&2
	exit 1
fi
echo "Generated files are up to date."
