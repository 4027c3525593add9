#!/usr/bin/env bash
# Prints the policy benchmark as a Markdown table (docs/benchmarks.md):
# `wva simulate` on the embedded default (bursty), the spike shape, a 7
# minute start-up, the two Azure 2023 traces and the conv trace at 0.8x,
# 1.2x and 1.5x its rate, with every policy (wva on the shipped
# configuration, the slo-planner), and wva on the token analyzer
# (examples/slo-planner/token-analyzer.yaml) for comparison.
# Usage: hack/bench-planner.sh [DIR holding azure-llm-inference-2023-*.csv]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
traces="${1:-$root/examples/traces}"
cd "$root"
bin="$(mktemp -d)/wva"
go build -o "$bin" ./cmd/wva
rows() {
	awk -v w="$1" -v as="$2" '($1=="wva"||$1=="wva-v1"||$1=="queue-threshold"||$1=="kpa"||$1=="static-peak"||$1=="oracle") && !(as != "" && $1 != "wva") {
		p = ($1 == "wva" && as != "") ? as : $1
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", w, p, $2, $3, $4, $10, $11 }'
}
run() {
	local name=$1
	shift
	"$bin" simulate --progress never "$@" | rows "$name" ""
	# The oracle runs too, so "x oracle" is against the same plan.
	"$bin" simulate --progress never --policies wva,oracle --wva-config examples/slo-planner/token-analyzer.yaml "$@" | rows "$name" "wva (token analyzer)"
}
echo "| workload | policy | cost | x oracle | SLO met | mean replicas | peak replicas |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
run "default (bursty)"
run "spike" --shape spike
run "default, 7m start-up" --startup-delay 7m
for t in conv code; do
	f="$traces/azure-llm-inference-2023-$t.csv"
	if [[ -f $f ]]; then run "Azure $t" --trace "$f"; fi
done
f="$traces/azure-llm-inference-2023-conv.csv"
if [[ -f $f ]]; then
	for r in 0.8 1.2 1.5; do run "Azure conv x$r" --trace "$f" --rate-scale "$r"; done
fi
