#!/usr/bin/env bash
# Well-formed runs with hostile values and files that are not what their name
# says (issue #32), through the CLI: extreme times and world sizes, sparse
# string ids, control characters in recorded text, FIFOs, directories and
# unreadable files where run files belong, damage that only a full read
# finds. Each gives one clear line and exit 3, or a bounded result; commands
# run under a memory limit and a timeout.
#   hardening_test.sh MESHSCOPE
set -uo pipefail
cli=$1
dir=$(mktemp -d)
chmod 755 "$dir"  # the permission check runs as nobody
trap 'rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
limited() { (ulimit -v 1048576 && timeout 60 "$@"); }  # 1 GiB, 60 s
sql() {  # sql FILE STATEMENTS: edits a rank file as a damaged or hostile writer would
  python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$1" "$2"
}
manifest() {  # manifest RUN KEY JSON
  python3 -c 'import json,sys; p=sys.argv[1]+"/manifest.json"; m=json.load(open(p)); m[sys.argv[2]]=json.loads(sys.argv[3]); json.dump(m,open(p,"w"))' "$1" "$2" "$3"
}
"$cli" synth -o "$dir/base" --ranks 2 --steps 3 --layers 2 --incidents-per-step 2 >/dev/null
fresh() { rm -rf "$dir/$1"; cp -r "$dir/base" "$dir/$1"; }

# 1. INT64 extremes in times: the export writes them exactly.
fresh times
sql "$dir/times/rank-00000.msdb" "UPDATE optimizer_steps SET start_ns=-9223372036854775808 WHERE id=1;
  UPDATE collectives SET start_ns=-9223372036854775808, end_ns=9223372036854775807 WHERE seq=1;"
check export-int64-min 0 limited "$cli" export "$dir/times" -o "$dir/times.json"
check export-int64-min-parses 0 python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/times.json"
check export-int64-min-exact 0 grep -q '"ts":-9223372036854775.808' "$dir/times.json"
for format in html md json csv sarif; do
  check "report-int64-$format" 0 limited "$cli" report "$dir/times" --format $format -o "$dir/times.$format"
done

# 2. A huge world size: missing ranks are named up to 64, the rest counted.
fresh world
manifest "$dir/world" world_size 2147483647
check huge-world-size 1 limited "$cli" check "$dir/world"
expect huge-world-size-bounded "^missing-rank: ranks after 65: 2147483581 more missing"
[[ $(grep -c '^missing-rank:' <<<"$out") -eq 65 ]] || { echo "FAIL huge-world-size-lines"; failures=$((failures + 1)); }
check huge-world-size-report 0 limited "$cli" report "$dir/world" --format json -o "$dir/world.json"
check huge-world-size-count 0 python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["missing_rank_count"]==2147483645 and len(d["missing_ranks"])==64' "$dir/world.json"

# 3. Sparse string ids like k*2^24, one of them used.
fresh strings
rows=$(for k in $(seq 1 40); do echo "INSERT INTO strings VALUES ($((k << 24)), 'far $k');"; done)
sql "$dir/strings/rank-00000.msdb" "$rows UPDATE incidents SET op_id=$((40 << 24));"
check sparse-string-ids 1 limited "$cli" check "$dir/strings"
expect sparse-string-named "far 40"
check sparse-string-ids-export 0 limited "$cli" export "$dir/strings" -o "$dir/strings.json"

# 6. A FIFO named like a run file: refused by name, nothing blocks.
fresh fifo
rm "$dir/fifo/manifest.json" && mkfifo "$dir/fifo/manifest.json"
for command in info summary check; do
  check "fifo-manifest-$command" 3 timeout 20 "$cli" $command "$dir/fifo"
  expect "fifo-manifest-$command-named" "fifo/manifest.json: is a FIFO, not a regular file"
done
fresh fifo-rank
rm "$dir/fifo-rank/rank-00001.msdb" && mkfifo "$dir/fifo-rank/rank-00001.msdb"
check fifo-rank 3 timeout 20 "$cli" report "$dir/fifo-rank" -o "$dir/fifo.html"
expect fifo-rank-named "rank-00001.msdb: is a FIFO, not a regular file"

# 7. Control characters in recorded text are escaped: one line per finding.
fresh ctrl
sql "$dir/ctrl/rank-00000.msdb" "UPDATE strings SET text='evil'||char(27)||'[31m'||char(10)||'next' WHERE id IN (SELECT op_id FROM incidents);
  UPDATE meta SET value='host'||char(27)||']0;title'||char(7) WHERE key='hostname';"
manifest "$dir/ctrl" torch_version '"2.11\u001b[2J"'
for command in check info summary; do
  "$cli" $command "$dir/ctrl" >"$dir/ctrl.$command" 2>&1
  check "ctrl-$command-no-escape-byte" 1 grep -q $'\x1b' "$dir/ctrl.$command"
done
out=$(cat "$dir/ctrl.check")
expect ctrl-check-escaped 'evil\\x1b\[31m\\nnext'
check ctrl-check-one-line-per-finding 1 grep -Ev '^(unreconciled|invalid|divergent|unreadable|missing-rank|no-strategy|dtensor-error|collective-error|hang): |^meshscope check: ' "$dir/ctrl.check"
out=$(cat "$dir/ctrl.info")
expect ctrl-info-escaped 'host vm|host\\x1b\]0;title\\x07'
expect ctrl-info-torch-escaped 'torch +2\.11\\x1b\[2J'
"$cli" diff "$dir/base" "$dir/ctrl" >"$dir/ctrl.diff" 2>&1
check ctrl-diff-no-escape-byte 1 grep -q $'\x1b' "$dir/ctrl.diff"

# 8. Damage only a full read finds: check, report and summary agree.
fresh chunk
sql "$dir/chunk/rank-00000.msdb" "UPDATE op_chunks SET count=1024;"
for command in summary info check; do
  check "corrupt-chunk-$command" 3 "$cli" $command "$dir/chunk"
  expect "corrupt-chunk-$command-named" "rank-00000.msdb: corrupt op chunk at seq 1"
done
check corrupt-chunk-report 3 "$cli" report "$dir/chunk" -o "$dir/chunk.html"
fresh chunk-low
sql "$dir/chunk-low/rank-00000.msdb" "UPDATE op_chunks SET count=count-1;"
check lowered-chunk-count 3 "$cli" summary "$dir/chunk-low"
expect lowered-chunk-count-named "claims [0-9]+ ops for seqs"
fresh index
# An index page that only the HTML report's collective query reads.
python3 - "$dir/index/rank-00000.msdb" <<'PY'
import sqlite3, sys
path = sys.argv[1]
c = sqlite3.connect(path)
page_size = c.execute("PRAGMA page_size").fetchone()[0]
root = c.execute("SELECT rootpage FROM sqlite_schema WHERE name='collectives_by_start'").fetchone()[0]
c.close()
with open(path, "r+b") as f:
    f.seek((root - 1) * page_size + 8)
    f.write(b"\xff" * 64)
PY
check damaged-index-report 3 "$cli" report "$dir/index" --format html -o "$dir/index.html"
check damaged-index-check 3 "$cli" check "$dir/index"
expect damaged-index-check-named "rank-00000.msdb: corrupt database"

# 9. World sizes out of range, a directory manifest, an unreadable rank file.
for size in -5 0 -2147483648 1e30 4294967298; do
  fresh bad-size
  manifest "$dir/bad-size" world_size "$size"
  check "world-size-$size" 3 "$cli" check "$dir/bad-size"
  expect "world-size-$size-named" "bad-size/manifest.json: field 'world_size' is "
  fresh bad-size
  sql "$dir/bad-size/rank-00001.msdb" "UPDATE meta SET value='$size' WHERE key='world_size';"
  check "meta-world-size-$size" 3 "$cli" summary "$dir/bad-size"
  expect "meta-world-size-$size-named" "rank-00001.msdb: meta 'world_size' is '$size', not an integer"
done
fresh dir-manifest
rm "$dir/dir-manifest/manifest.json" && mkdir "$dir/dir-manifest/manifest.json"
check directory-manifest 3 "$cli" check "$dir/dir-manifest"
expect directory-manifest-named "dir-manifest/manifest.json: is a directory, not a regular file"
fresh unreadable
chmod 755 "$dir/unreadable" && chmod 000 "$dir/unreadable/rank-00000.msdb"
as_nobody=()
[[ $(id -u) -eq 0 ]] && as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
check unreadable-rank 3 "${as_nobody[@]}" "$cli" summary "$dir/unreadable"
expect unreadable-rank-named "rank-00000.msdb: permission denied"

# Found by the value fuzzer (tests/fuzz/value_fuzz.py).
fresh format
manifest "$dir/format" format 671088640
check manifest-format-number 3 limited "$cli" summary "$dir/format"
expect manifest-format-number-named "format/manifest.json: not a meshscope run manifest"
fresh utf8
sql "$dir/utf8/rank-00000.msdb" "UPDATE meta SET value=CAST(x'e282' AS TEXT) WHERE key='hostname';"
check summary-json-invalid-utf8 0 limited "$cli" summary --json "$dir/utf8"
fresh name-id
# an interned id no row holds, far beyond the table
PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/../fuzz" python3 -c 'import sys, value_fuzz
value_fuzz.set_first_op(sys.argv[1], "name", 2**32 + 2)' "$dir/name-id/rank-00001.msdb"
check huge-op-name-id 1 limited "$cli" check "$dir/name-id"
expect huge-op-name-id-named "missing string #4294967298"

finish
