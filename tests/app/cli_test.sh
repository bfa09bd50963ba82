#!/usr/bin/env bash
# The meshscope CLI as a user runs it: exit codes, one-line errors naming the
# file, and summaries that match what was written.
set -uo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
checks=0
check() {  # check NAME EXPECTED_RC COMMAND...; output in $out
    local name=$1 want=$2
    shift 2
    checks=$((checks + 1))
    out=$("$@" 2>&1)
    local rc=$?
    if [[ $rc -ne $want ]]; then
        echo "FAIL $name: exit $rc, expected $want"$'\n'"$out"
        failures=$((failures + 1))
        return 1
    fi
    echo "ok   $name"
}
expect() {  # expect NAME PATTERN: $out must match the extended regex
    checks=$((checks + 1))
    if ! grep -Eq -- "$2" <<<"$out"; then
        echo "FAIL $1: output does not match /$2/"$'\n'"$out"
        failures=$((failures + 1))
    fi
}

check synth 0 "$cli" synth -o "$dir/run" --ranks 2 --steps 3 --layers 2 --incidents-per-step 1
expect synth-line "wrote .*: 2 ranks, [0-9]+ ops, 6 incidents, 3 steps"
check synth-refuses-existing 2 "$cli" synth -o "$dir/run"
check summary 0 "$cli" summary "$dir/run"
expect summary-table "world size 2  ranks readable 2"
check summary-json 0 "$cli" summary --json "$dir/run"
expect summary-json-steps '"steps": 3'
expect summary-json-incidents '"incidents": 3'
check info 0 "$cli" info "$dir/run"
expect info-ranks "rank 1 .*rank-00001.msdb"
check missing-path 3 "$cli" summary "$dir/absent"
expect missing-path-message "^meshscope: $dir/absent: no such file or directory$"
check usage 2 "$cli" summary
check help 0 "$cli" summary --help

cp -r "$dir/run" "$dir/damaged"
printf 'garbage' > "$dir/damaged/rank-00001.msdb"
check damaged-rank 3 "$cli" summary "$dir/damaged"
expect damaged-rank-names-file "^meshscope: $dir/damaged/rank-00001.msdb: not a meshscope rank file"
check damaged-partial 0 "$cli" summary --partial "$dir/damaged"
expect damaged-partial-table "ranks readable 1"
check damaged-info 3 "$cli" info "$dir/damaged"

rm "$dir/run/rank-00000.msdb"
check missing-rank 3 "$cli" summary "$dir/run"
expect missing-rank-message "rank-00000.msdb: missing \(rank 0 is listed in the manifest\)"

echo "$((checks - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
