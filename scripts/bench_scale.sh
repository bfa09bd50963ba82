#!/usr/bin/env bash
# Analysis at scale: many ranks of a synthetic run with a straggler (kept in
# build/bench-data between runs). Prints wall time and peak memory of each
# command. Targets (issue #46): `check` of 1,024 ranks x 10k ops in <= 5 s
# and <= 300 MB; 4,096 ranks checked.
#   scripts/bench_scale.sh [--baseline BIN] [--ranks 1024 --ops-per-rank 10000]
# --baseline BIN: also `check` and `check --fail-on any,straggler` with this
# build and BIN (another build's meshscope) alternating, five times each, and
# their medians side by side.
set -euo pipefail
baseline=
if [[ ${1:-} == --baseline ]]; then
  baseline=$(realpath "$2")
  shift 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
cli="$root/build/dev/app/meshscope"
args=(--ranks 1024 --ops-per-rank 10000)
[[ $# -gt 0 ]] && args=("$@")
run="$root/build/bench-data/scale-$(echo "${args[*]}" | tr ' ' '_' | tr -d -)"
if [[ ! -f "$run/manifest.json" ]]; then
  rm -rf "$run"
  # one rank in 7/10 of the way is 20 ms slower every step (its input)
  ranks=1024
  for ((i = 0; i < ${#args[@]}; ++i)); do [[ ${args[i]} == --ranks ]] && ranks=${args[i + 1]}; done
  "$cli" synth -o "$run" --layers 4 --incidents-per-step 1 --straggler $((ranks * 7 / 10)) "${args[@]}"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cli" summary "$run" | sed -n 1p  # reads it all: no SIGPIPE under pipefail
source "$root/scripts/bench_lib.sh"
printf '%-34s %9s %12s\n' command wall "peak RSS"
measure "summary" "$cli" summary "$run"
measure "check (incidents only)" "$cli" check "$run" --no-op-compare
measure "check" "$cli" check "$run"
measure "check --fail-on any,straggler" "$cli" check "$run" --fail-on any,straggler
grep -m1 '^straggler:' "$out/stdout" | cut -c1-120 || true
measure "report --format html" "$cli" report "$run" --format html -o "$out/report.html"
measure "report --format json" "$cli" report "$run" --format json -o "$out/report.json"
if [[ -n $baseline ]]; then
  # alternating, so that a shared host's load moves both alike
  for ((i = 0; i < 5; ++i)); do
    for what in check straggler; do
      opts=()
      [[ $what == straggler ]] && opts=(--fail-on any,straggler)
      for who in this baseline; do
        bin=$cli
        [[ $who == baseline ]] && bin=$baseline
        /usr/bin/time -f "%e %M" -o "$out/time" "$bin" check "$run" "${opts[@]}" >/dev/null 2>&1 || true
        echo "$what $who $(tail -n 1 "$out/time")" >>"$out/side-by-side"
      done
    done
  done
  python3 - "$out/side-by-side" "$baseline" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    what, who, secs, kb = line.split()
    runs.setdefault(what, {}).setdefault(who, []).append((float(secs), int(kb)))
for what, command in (("check", "check"), ("straggler", "check --fail-on any,straggler")):
    med = {who: statistics.median(s for s, _ in r) for who, r in runs[what].items()}
    for who, name in (("this", "this build"), ("baseline", sys.argv[2])):
        r = runs[what][who]
        print(f"{command}, {name}: median {med[who]:.2f} s ({min(s for s, _ in r):.2f}-"
              f"{max(s for s, _ in r):.2f}), peak {max(k for _, k in r) // 1024} MiB")
    print(f"{command}, this build / baseline: {med['this'] / med['baseline']:.2f}x")
EOF
fi
