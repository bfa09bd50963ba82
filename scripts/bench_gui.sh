#!/usr/bin/env bash
# GUI benchmark under Xvfb (Mesa llvmpipe): time to first frame of a synthetic
# 8-rank run (by default about 10 million ops, the run scripts/bench_report.sh
# uses; kept in build/bench-data), frame times with about 1 million spans in
# view, and the process's peak memory. Targets (docs/performance.md): first
# frame <= 2 s, <= 16 ms per frame; 8 ranks x 2M ops in <= 600 MB (issue #46).
#   scripts/bench_gui.sh [--ops-per-rank 1250000] [--live] [--reopen] [--spans 1000000 --frames 60]
# --live: the run is written (meshscope synth) while the GUI opens and follows
# it; prints the ops at the first frame, the time to follow it to its end and
# the GUI thread's longest stall.
# The run is opened as for the first time: the timeline cache
# (ui/timeline/span_cache.h) starts empty in a folder of its own, which the
# open fills. --reopen: then opened again, its finished ranks' ops from
# that cache (a run opened before), and both are printed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
ops=1250000 live=0 reopen=0
while [[ ${1:-} == --ops-per-rank || ${1:-} == --live || ${1:-} == --reopen ]]; do
  if [[ $1 == --live ]]; then
    live=1
    shift
  elif [[ $1 == --reopen ]]; then
    reopen=1
    shift
  else
    ops=$2
    shift 2
  fi
done
synth=(synth --ranks 8 --ops-per-rank "$ops" --layers 13 --incidents-per-step 1)
if ((live)); then
  run="$root/build/bench-data/live-ranks_8_opsperrank_${ops}"
  rm -rf "$run"
  "$cli" "${synth[@]}" -o "$run" >/dev/null &
  writer=$!
  for _ in $(seq 1 200); do [[ -f $run/rank-00000.msdb ]] && break; sleep 0.05; done
  set -- "$@" --follow 1
else
  run="$root/build/bench-data/report-ranks_8_opsperrank_${ops}_layers_13_incidentsperstep_1"
  if [[ ! -f "$run/manifest.json" ]]; then
    rm -rf "$run"
    "$cli" "${synth[@]}" -o "$run"
  fi
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"; [[ -n ${writer:-} ]] && kill $writer 2>/dev/null || true' EXIT
export MESHSCOPE_GUI_CACHE_DIR=$cache
bench() { "$root/tests/ui/xvfb.sh" "$root/build/dev/tests/bench/ui_bench" "$run" "$@" 2> >(grep -v XDG_RUNTIME_DIR >&2); }
if ((reopen)); then
  echo "== first open (the rank files read, the timeline cache written)"
  bench "$@"
  sync
  echo
  echo "== opened again (finished ranks' ops from the timeline cache)"
fi
bench "$@"

