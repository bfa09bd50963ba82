#!/usr/bin/env bash
# Configures and builds meshscope (CMake preset "dev" -> build/dev).
#   scripts/build.sh [--no-venv]   --no-venv: skip the Python virtualenv
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" "$@"
cd "$root"
cmake --preset dev >/dev/null
cmake --build --preset dev
