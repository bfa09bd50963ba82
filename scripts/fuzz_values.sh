#!/usr/bin/env bash
# Value-level fuzzing (tests/fuzz/value_fuzz.py) for longer than ctest's
# fuzz.values: hostile values in well-formed runs, every read-only CLI
# subcommand and meshscope-gui --screenshot under a memory limit and a
# timeout. Seeds: two synthetic runs and, when the capture agent is built,
# the bundled 2-rank demo training recorded with `meshscope record`.
#   scripts/fuzz_values.sh [SECONDS] [--seed K]     default 600 s, seed 1
# Prints one line per failure and a last line with cases, crashes, hangs and
# out-of-memory counts; failing cases are kept in $BUILD/value-fuzz-findings.
# MESHSCOPE_BUILD picks the build directory (default build/dev, built by
# scripts/build.sh when it has no meshscope).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
shift $(($# > 0 ? 1 : 0))
build=$(realpath -m "${MESHSCOPE_BUILD:-$root/build/dev}")
[[ -x "$build/app/meshscope" ]] || "$root/scripts/build.sh" >/dev/null
cli="$build/app/meshscope"
gui=-
[[ -x "$build/app/meshscope-gui" ]] && gui="$build/app/meshscope-gui"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=()
if compgen -G "$build/python/meshscope/_capture*.so" >/dev/null && [[ -x "$root/.venv/bin/python" ]]; then
  if (cd "$work" && MESHSCOPE_PYTHONPATH="$build/python" OMP_NUM_THREADS=1 timeout 300 \
      "$cli" record -o "$work/recorded" --policy auto -n 2 -- \
      "$root/.venv/bin/python" "$root/resources/demo/train_demo.py") >"$work/record.log" 2>&1; then
    runs=(--run "$work/recorded")
  else
    echo "fuzz_values: recording the demo failed, synthetic seeds only (see below)" >&2
    tail -5 "$work/record.log" >&2
  fi
fi
mkdir -p "$build/value-fuzz-findings"
echo "fuzz_values: $(date -u +%Y-%m-%dT%H:%MZ), $seconds s, $(nproc) cores, seeds: synthetic${runs:+ and a recorded demo run}"
exec "$root/tests/fuzz/value_fuzz.sh" "$cli" "$gui" --seconds "$seconds" --gui-every 3 \
  --keep "$build/value-fuzz-findings" "${runs[@]}" "$@"
