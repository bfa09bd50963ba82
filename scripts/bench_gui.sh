#!/usr/bin/env bash
# GUI benchmark under Xvfb (Mesa llvmpipe): time to first frame of a synthetic
# 8-rank run (by default about 10 million ops, the run scripts/bench_report.sh
# uses; kept in build/bench-data), frame times with about 1 million spans in
# view, and the process's peak memory. Targets (docs/performance.md): first
# frame <= 2 s, <= 16 ms per frame; 8 ranks x 2M ops in <= 600 MB (issue #46).
#   scripts/bench_gui.sh [--ops-per-rank 1250000] [--spans 1000000 --frames 60]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
ops=1250000
if [[ ${1:-} == --ops-per-rank ]]; then
  ops=$2
  shift 2
fi
run="$root/build/bench-data/report-ranks_8_opsperrank_${ops}_layers_13_incidentsperstep_1"
if [[ ! -f "$run/manifest.json" ]]; then
  rm -rf "$run"
  "$cli" synth -o "$run" --ranks 8 --ops-per-rank "$ops" --layers 13 --incidents-per-step 1
fi
"$root/tests/ui/xvfb.sh" "$root/build/dev/tests/bench/ui_bench" "$run" "$@" 2> >(grep -v XDG_RUNTIME_DIR >&2)
