#!/usr/bin/env bash
# GUI benchmark under Xvfb (Mesa llvmpipe): time to first frame of a synthetic
# 8-rank run of about 10 million ops (the same run scripts/bench_report.sh
# uses, kept in build/bench-data) and frame times with about 1 million spans
# in view. Targets (docs/performance.md): first frame <= 2 s, <= 16 ms per frame.
#   scripts/bench_gui.sh [--spans 1000000 --frames 60]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
run="$root/build/bench-data/report-ranks_8_opsperrank_1250000_layers_13_incidentsperstep_1"
if [[ ! -f "$run/manifest.json" ]]; then
  rm -rf "$run"
  "$cli" synth -o "$run" --ranks 8 --ops-per-rank 1250000 --layers 13 --incidents-per-step 1
fi
"$root/tests/ui/xvfb.sh" "$root/build/dev/tests/bench/ui_bench" "$run" "$@" 2> >(grep -v XDG_RUNTIME_DIR >&2)
