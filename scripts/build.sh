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
# The project's virtualenv sees this build: `import meshscope` without
# PYTHONPATH (a .pth file) and meshscope / meshscope-gui on its PATH (links),
# as `pip install -e` would give. The last checkout built wins.
if [[ $capture == ON ]]; then
  site=$("$root/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$root/build/dev/python" >"$site/meshscope-build.pth"
  for tool in meshscope meshscope-gui; do
    [[ -x "$root/build/dev/app/$tool" ]] && ln -sfn "$root/build/dev/app/$tool" "$root/.venv/bin/$tool"
  done
fi
