#!/usr/bin/env bash
# Configures and builds meshscope (CMake preset "dev" -> build/dev).
#   scripts/build.sh [--no-venv]   --no-venv: skip the Python virtualenv and
#                                  with it the capture agent (core, CLI only)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" "$@"
cd "$root"
capture=ON
[[ "${1:-}" == "--no-venv" ]] && capture=OFF
cmake --preset dev -DMESHSCOPE_BUILD_CAPTURE=$capture -DMESHSCOPE_BUILD_UI=ON >/dev/null
cmake --build --preset dev
