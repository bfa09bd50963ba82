#!/usr/bin/env bash
# The main job: builds meshscope with the capture agent, records the bundled
# demo training (2 ranks, gloo, CPU) with policy `auto`, prints the run's
# summary and check, and writes its HTML report (the path is printed last).
# Idempotent; the first run installs and builds (minutes).
#   scripts/demo.sh [extra `meshscope record` options, e.g. --policy observe]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
run="$root/meshscope-runs/demo-$(date +%Y%m%d-%H%M%S)"
cd "$root"
# record prints where the run is and, at the end, its summary
status=0
build/dev/app/meshscope record -o "$run" --policy auto -n 2 "$@" -- \
  "$root/.venv/bin/python" resources/demo/train_demo.py || status=$?
[[ -d "$run" ]] || exit "$status"
build/dev/app/meshscope check "$run" --partial || true
build/dev/app/meshscope report "$run" --partial --format html -o "$run/report.html"
echo "report: $run/report.html"
exit "$status"

