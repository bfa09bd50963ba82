#!/usr/bin/env bash
# How much of the agent's per-op time is cold caches: small DTensor ops in
# groups of 1, 2, 4, 8 between cache-evicting work, each phase of the
# dispatcher hook timed, side by side in one run. Extra arguments go to
# tests/bench/hook_cache.py (--rounds/--groups/--ops/--evict-mib).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/hook_cache.py" "$@"
