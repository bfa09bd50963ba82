#!/usr/bin/env bash
# Runs a GUI test on a private Xvfb display (Mesa llvmpipe gives OpenGL).
# Exit 77 (ctest: skipped) where there is no Xvfb.
set -euo pipefail
if ! command -v xvfb-run >/dev/null; then
  echo "xvfb-run not found (apt-get install xvfb): GUI test skipped"
  exit 77
fi
export QT_QPA_PLATFORM=xcb LIBGL_ALWAYS_SOFTWARE=1
exec xvfb-run -a -s "-screen 0 1600x1000x24 -nolisten tcp" "$@"
