#!/usr/bin/env bash
# Prints the slo-planner's benchmark: `wva simulate` on the embedded
# default (bursty), the spike shape and the two Azure traces, with wva
# running examples/slo-planner/wva-config.yaml, beside the constant peak
# fleet and the oracle. Usage: hack/bench-planner.sh [TRACE_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
traces="${1:-$root/examples/traces}"
cd "$root"
go build -o /tmp/wva-bench ./cmd/wva
run() {
	local name=$1
	shift
	/tmp/wva-bench simulate --progress never --wva-config examples/slo-planner/wva-config.yaml \
		--policies wva,static-peak,oracle "$@" | awk -v w="$name" '$1=="wva"||$1=="static-peak"||$1=="oracle" {printf "| %s | %s | %s | %s | %s | %s |\n", w, $1, $2, $3, $4, $10}'
}
echo "| workload | policy | cost | x oracle | SLO met | mean replicas |"
echo "| --- | --- | --- | --- | --- | --- |"
run "default (bursty)"
run "spike" --shape spike
run "default, 7m start-up" --startup-delay 7m
for t in conv code; do
	f="$traces/azure-llm-inference-2023-$t.csv"
	[[ -f $f ]] && run "Azure $t" --trace "$f"
done
