#!/usr/bin/env bash
# What meshscope's Python adapters add to each call they wrap (a TP layer's
# forward, to_local, from_local, redistribute, an optimizer step), with the
# dispatcher hook off, side by side with the same calls uninstrumented in one
# run. Extra arguments go to tests/bench/adapter_calls.py (--rounds/--calls).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/adapter_calls.py" "$@"
