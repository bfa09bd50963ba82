#!/usr/bin/env bash
# Analysis and report benchmark on a synthetic run of about 10 million ops and
# 100,000 incidents over 8 ranks (kept in build/bench-data between runs).
# Prints wall time and peak memory of each command; target: HTML <= 5 s.
#   scripts/bench_report.sh [--ranks 8 --ops-per-rank 1250000 --layers 13]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
args=(--ranks 8 --ops-per-rank 1250000 --layers 13 --incidents-per-step 1)
[[ $# -gt 0 ]] && args=("$@")
run="$root/build/bench-data/report-$(echo "${args[*]}" | tr ' ' '_' | tr -d -)"
if [[ ! -f "$run/manifest.json" ]]; then
  rm -rf "$run"
  "$cli" synth -o "$run" "${args[@]}"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cli" summary "$run" | head -1
source "$root/scripts/bench_lib.sh"
printf '%-34s %9s %12s\n' command wall "peak RSS"
measure "summary" "$cli" summary "$run"
measure "check (incidents only)" "$cli" check "$run" --no-op-compare
measure "check (with op comparison)" "$cli" check "$run"
# the same plus where the time goes (ops, steps, slowest ranks): its cost
measure "check --fail-on any,straggler" "$cli" check "$run" --fail-on any,straggler
for format in html md json csv sarif; do
  measure "report --format $format" "$cli" report "$run" --format "$format" -o "$out/report.$format"
done
measure "export --format chrome-trace" "$cli" export "$run" -o "$out/trace.json"
ls -l "$out" | awk 'NR > 1 && $9 ~ /report|trace/ {printf "  %-16s %12d bytes\n", $9, $5}'
