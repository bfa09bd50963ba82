#!/usr/bin/env bash
# Records seed scenario s1 (an input batch meeting sharded weights) with
# `meshscope record -n 2 --policy auto`, then opens the run in the GUI test
# ui_smoke_test under Xvfb.
#   scenario_smoke.sh MESHSCOPE PYTHON SCENARIOS_DIR SMOKE_TEST
set -euo pipefail
cli=$1 python=$2 scenarios=$3 smoke=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/out"
(cd "$scenarios" && SCENARIO_OUT="$work/out" OMP_NUM_THREADS=1 \
  "$cli" record -o "$work/run" --policy auto -n 2 -- "$python" s1_input_batch.py >"$work/record.log" 2>&1) ||
  { cat "$work/record.log"; exit 1; }
MESHSCOPE_SMOKE_RUN="$work/run" exec "$here/xvfb.sh" "$smoke"
