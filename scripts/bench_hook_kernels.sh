#!/usr/bin/env bash
# What the dispatcher hook's own kernels of common ops save per op: warm
# loops of single ops without meshscope, with the hook's kernels and with
# every op through its boxed fallback, side by side in one run. Extra
# arguments go to tests/bench/hook_kernels.py (--rounds/--calls).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/hook_kernels.py" "$@"
