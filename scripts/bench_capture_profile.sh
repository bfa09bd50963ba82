#!/usr/bin/env bash
# Where the capture overhead goes, in CPU samples (perf cpu-clock): the
# training loop of scripts/bench_capture.sh with uninstrumented, adapters-only
# and full-agent blocks interleaved in one process, each sample given to its
# block by timestamp. Extra arguments go to tests/bench/capture_profile.py
# (--rounds/--steps/--freq/--top/--steady-heap/...).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! command -v perf >/dev/null || ! perf --version >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]]; then
        apt-get install -y linux-perf >/dev/null 2>&1 ||
            { apt-get update >/dev/null && apt-get install -y linux-perf >/dev/null; }
    else
        echo "bench_capture_profile.sh: needs perf (apt-get install linux-perf)" >&2
        exit 1
    fi
fi
"$root/scripts/build.sh" >/dev/null
PYTHONPATH="$root/build/dev/python" exec "$root/.venv/bin/python" \
  "$root/tests/bench/capture_profile.py" "$@"
