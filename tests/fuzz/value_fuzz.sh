#!/usr/bin/env bash
# Runs the value-level fuzzer (value_fuzz.py) on seed runs written by the
# real writer: two synthetic runs (mixed-tensor incidents with INVALID and
# unreconciled groups; a job that ends in failures, hangs and unclosed
# ranks) plus any recorded run given with --run. With a GUI binary and Xvfb
# the GUI's screenshot mode is fuzzed too (xvfb-run), else the CLI alone.
#   value_fuzz.sh MESHSCOPE MESHSCOPE_GUI|- [value_fuzz.py options: --cases N | --seconds S,
#                 --seed K, --gui-every N, --run DIR, --keep DIR]
set -euo pipefail
cli=$1 gui=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
"$cli" synth -o "$seeds/incidents" --ranks 2 --steps 3 --layers 2 --incidents-per-step 2 --seed 7 >/dev/null
"$cli" synth -o "$seeds/failures" --ranks 2 --steps 2 --layers 2 --incidents-per-step 1 --failures \
  --seed 7 >/dev/null
python=$(command -v python3)
args=(--cli "$cli" --run "$seeds/incidents" --run "$seeds/failures" "$@")
if [[ "$gui" != - ]] && command -v xvfb-run >/dev/null; then
  export LIBGL_ALWAYS_SOFTWARE=1 QT_QPA_PLATFORM=xcb
  exec xvfb-run -a -s "-screen 0 1600x1000x24 -nolisten tcp" "$python" "$here/value_fuzz.py" \
    --gui "$gui" "${args[@]}"
fi
[[ "$gui" != - ]] && echo "value fuzz: no xvfb-run, the GUI is left out" >&2
exec "$python" "$here/value_fuzz.py" "${args[@]}"
