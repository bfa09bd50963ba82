#!/usr/bin/env bash
# Builds (Release) and runs the run-store benchmarks. The 10M-op file is
# generated once into build/bench-data.
#   scripts/bench.sh [google-benchmark flags]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" --no-venv
cd "$root"
cmake --preset release >/dev/null
cmake --build --preset release --target store_bench
mkdir -p build/bench-data
MESHSCOPE_BENCH_DATA="$root/build/bench-data" build/release/tests/bench/store_bench "$@"
