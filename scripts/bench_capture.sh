#!/usr/bin/env bash
# Capture overhead benchmark: a DTensor MLP training loop on 2 ranks (gloo),
# uninstrumented vs CommDebugMode vs torch.profiler vs meshscope, side by side
# in one run. Extra arguments go to tests/bench/capture_overhead.py
# (--dim/--hidden/--batch/--layers/--rounds/--steps).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/capture_overhead.py" "$@"
