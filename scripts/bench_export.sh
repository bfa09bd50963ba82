#!/usr/bin/env bash
# Exports at scale: wall time and peak memory of the Chrome-trace export and
# the torch-profiler export (one file per rank) of a synthetic run (kept in
# build/bench-data). Target (issue #46): bounded memory, whatever the ops.
#   scripts/bench_export.sh [--ranks 8 --ops-per-rank 5000000] [--gzip]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
args=() gzip=()
for a in "$@"; do [[ $a == --gzip ]] && gzip=(--gzip) || args+=("$a"); done
((${#args[@]})) || args=(--ranks 8 --ops-per-rank 5000000)
run="$root/build/bench-data/export-$(echo "${args[*]}" | tr ' ' '_' | tr -d -)"
if [[ ! -f "$run/manifest.json" ]]; then
  rm -rf "$run"
  "$cli" synth -o "$run" --layers 4 --incidents-per-step 1 "${args[@]}"
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/meshscope-export-XXXXXX")
trap 'rm -rf "$out"' EXIT
source "$root/scripts/bench_lib.sh"
written() {  # what the export wrote, and its own last line
  printf '  %.0f MiB written\n' "$(($(du -sk "$out/written" | cut -f1) / 1024))"
  tail -n 1 "$out/err" | sed 's/^/  /'
  rm -rf "$out/written"
}
printf '%-34s %9s %12s\n' command wall "peak RSS"
measure "export --format chrome-trace" "$cli" export "$run" -o "$out/written"
written
measure "export --format torch-profiler ${gzip[*]}" "$cli" export "$run" --format torch-profiler \
  "${gzip[@]}" -o "$out/written"
written
