#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GoogleTest and
# pytest) under ctest. Extra arguments go to ctest (e.g. -R store).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh"
cd "$root"
ctest --preset dev -j2 "$@"
