#!/usr/bin/env bash
# The main job, for now: build, write a small two-rank run through the run
# store, and print its summary. Prints where the run is.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" --no-venv >/dev/null
run="$root/meshscope-runs/demo-$(date -u +%Y%m%d-%H%M%S)"
"$root/build/dev/app/meshscope" synth -o "$run" --ranks 2 --steps 8
"$root/build/dev/app/meshscope" summary "$run"
echo "run directory: $run"
