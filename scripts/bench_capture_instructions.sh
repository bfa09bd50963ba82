#!/usr/bin/env bash
# Capture overhead in instructions (callgrind): the training loop of
# scripts/bench_capture.sh counted instruction by instruction, so the ratios
# do not move with the machine's load. Extra arguments go to
# tests/bench/capture_instructions.py (--steps/--warm/--only/--dim/...).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! command -v valgrind >/dev/null || [[ ! -f /usr/include/valgrind/callgrind.h ]]; then
    if [[ $(id -u) == 0 ]]; then
        apt-get install -y valgrind >/dev/null 2>&1 ||
            { apt-get update >/dev/null && apt-get install -y valgrind >/dev/null; }
    else
        echo "bench_capture_instructions.sh: needs valgrind (apt-get install valgrind)" >&2
        exit 1
    fi
fi
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/capture_instructions.py" "$@"
