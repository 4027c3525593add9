#!/usr/bin/env bash
# Regenerates the generated code of the wva API types:
#   pkg/apis/llmd/v1alpha1/zz_generated.deepcopy.go   (controller-gen)
#   deploy/crd/llmd.ai_variantautoscalings.yaml       (controller-gen)
#   charts/wva/files/llmd.ai_variantautoscalings.yaml (its copy)
#   pkg/generated/clientset/versioned/...             (client-gen)
#   pkg/generated/listers/...                         (lister-gen)
#   pkg/generated/informers/externalversions/...      (informer-gen)
# Runnable from any directory.
set -euo pipefail

# shellcheck source=hack/lib/codegen.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/codegen.sh"

codegen::generate "${WVA_DEEPCOPY_DIR}" "${WVA_CRD_DIR}"
cp "${WVA_CRD_DIR}/${WVA_CRD_FILE}" "${WVA_CHART_CRD_DIR}/${WVA_CRD_FILE}"
echo "Generated ${WVA_DEEPCOPY_DIR#"${WVA_ROOT}/"}/${WVA_DEEPCOPY_FILE} and ${WVA_CRD_DIR#"${WVA_ROOT}/"}/${WVA_CRD_FILE} (and its copy in ${WVA_CHART_CRD_DIR#"${WVA_ROOT}/"})"

# The typed client is generated into a temporary directory first, so a
# failed run leaves the checked-in client alone, and then replaces each
# wholly generated subdirectory, so files of removed types do not linger.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
codegen::generate_client "${tmp}"
mkdir -p "${WVA_CLIENT_DIR}"
for sub in "${WVA_CLIENT_SUBDIRS[@]}"; do
	rm -rf "${WVA_CLIENT_DIR:?}/${sub}"
	if [[ -d "${tmp}/${sub}" ]]; then
		mv "${tmp}/${sub}" "${WVA_CLIENT_DIR}/${sub}"
	fi
done
echo "Generated ${WVA_CLIENT_DIR#"${WVA_ROOT}/"}/{$(IFS=,; echo "${WVA_CLIENT_SUBDIRS[*]}")}"
