#!/usr/bin/env bash
# The main job: builds meshscope (capture agent and GUI), records the bundled
# demo training (2 ranks, gloo, CPU) with policy `auto` and opens it in
# meshscope-gui, which follows the recording live. Where there is no display
# it writes the run's HTML report instead; either way it prints the run's
# summary and check, and the report's path last.
# Idempotent; the first run installs and builds (minutes).
#   scripts/demo.sh [extra `meshscope record` options, e.g. --policy observe]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
run="$root/meshscope-runs/demo-$(date +%Y%m%d-%H%M%S)"
cd "$root"
gui=()
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" && -x build/dev/app/meshscope-gui ]]; then
  gui=(--gui)
else
  echo "meshscope: no display: writing the HTML report instead of opening the GUI" >&2
fi
# record prints where the run is and, at the end, its summary
status=0
build/dev/app/meshscope record -o "$run" --policy auto -n 2 "${gui[@]}" "$@" -- \
  "$root/.venv/bin/python" resources/demo/train_demo.py || status=$?
[[ -d "$run" ]] || exit "$status"
build/dev/app/meshscope check "$run" --partial || true
build/dev/app/meshscope report "$run" --partial --format html -o "$run/report.html"
echo "report: $run/report.html"
exit "$status"
