#!/usr/bin/env bash
# The meshscope CLI as a user runs it: exit codes, one-line errors naming the
# file, and summaries that match what was written.
set -uo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

check synth 0 "$cli" synth -o "$dir/run" --ranks 2 --steps 3 --layers 2 --incidents-per-step 1
expect synth-line "wrote .*: 2 ranks, [0-9]+ ops, 6 incidents, 3 steps"
check synth-refuses-existing 2 "$cli" synth -o "$dir/run"
check summary 0 "$cli" summary "$dir/run"
expect summary-table "world size 2  ranks readable 2"
check synth-20 0 "$cli" synth -o "$dir/run20" --ranks 20 --steps 2 --layers 1 --incidents-per-step 1
check summary-20 0 "$cli" summary "$dir/run20"
expect summary-20-sums-up "  \.\.\. 4 more rank\(s\) \(16-19\): ops [0-9]+, steps 2, .*closed 4 \(summary --all lists every rank\)"
check summary-20-all 0 "$cli" summary --all "$dir/run20"
expect summary-20-all-lists-rank-19 "^   19 "
check summary-json 0 "$cli" summary --json "$dir/run"
expect summary-json-steps '"steps": 3'
expect summary-json-incidents '"incidents": 3'
check info 0 "$cli" info "$dir/run"
expect info-ranks "rank 1 .*rank-00001.msdb"
check unknown-command 2 "$cli" bogus
expect unknown-command-names-it "^meshscope: unknown command 'bogus'; commands: record, info, summary, "
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
check damaged-info-problem-on-stderr 0 bash -c '"$1" info "$2" 2>&1 >/dev/null | grep -q "^meshscope: .*rank-00001.msdb: not a meshscope rank file"' _ "$cli" "$dir/damaged"
check damaged-info-stdout-has-no-problem 1 bash -c '"$1" info "$2" 2>/dev/null | grep -q "rank-00001.msdb: not"' _ "$cli" "$dir/damaged"

rm "$dir/run/rank-00000.msdb"
check missing-rank 3 "$cli" summary "$dir/run"
expect missing-rank-message "rank-00000.msdb: missing \(rank 0 is listed in the manifest\)"


# check / report / export / diff on a fresh synthetic run (it has INVALID and
# unreconciled incidents by design)
"$cli" synth -o "$dir/a" --ranks 2 --steps 3 --layers 2 --incidents-per-step 4 >/dev/null
check check-findings 1 "$cli" check "$dir/a"
expect check-invalid "^invalid: model.py:44: aten::mm: .* differs across ranks"
expect check-unreconciled "^unreconciled: .*aten::mul.Tensor"
check check-fail-on-divergent 0 "$cli" check "$dir/a" --fail-on divergent
check check-fail-on-reconciled 1 "$cli" check "$dir/a" --fail-on reconciled
expect check-reconciled-line "^reconciled: .*reconciled by the policy \(.*\) on rank\(s\) .*; fix: "
check check-any-leaves-reconciled-out 1 "$cli" check "$dir/a"
check check-any-has-no-reconciled-line 1 grep -q '^reconciled: ' <<<"$out"
check check-bad-kind 2 "$cli" check "$dir/a" --fail-on everything
check check-missing 3 "$cli" check "$dir/absent"
expect check-missing-message "^meshscope: $dir/absent: no such file or directory$"
for format in html md json csv sarif; do
  check "report-$format" 0 "$cli" report "$dir/a" --format "$format" -o "$dir/report.$format"
  [[ -s "$dir/report.$format" ]] || { echo "FAIL report-$format: empty file"; failures=$((failures + 1)); }
done
check report-json-parses 0 python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["groups"] and d["findings"]' "$dir/report.json"
check sarif-parses 0 python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["version"]=="2.1.0" and d["runs"][0]["results"]' "$dir/report.sarif"
check report-bad-format 2 "$cli" report "$dir/a" --format pdf -o "$dir/x"
check report-makes-its-folder 0 "$cli" report "$dir/a" -o "$dir/no/such/dir/x.md"
check report-in-made-folder 0 test -s "$dir/no/such/dir/x.md"
check report-unwritable 2 "$cli" report "$dir/a" -o "/proc/meshscope-none/x.md"
expect report-unwritable-names-it "^meshscope: /proc/meshscope-none/x.md: cannot create its folder /proc/meshscope-none"
check report-format-from-extension 0 "$cli" report "$dir/a" -o "$dir/by-name.md"
check report-is-markdown 0 grep -q '^# meshscope report' "$dir/by-name.md"
check report-format-flag-wins 0 "$cli" report "$dir/a" --format json -o "$dir/flag.md"
check report-flag-json-parses 0 python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/flag.md"
check export 0 "$cli" export "$dir/a" -o "$dir/trace.json"
check export-parses 0 python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["traceEvents"]; assert {x["ph"] for x in e} >= {"X","M","i","C"}' "$dir/trace.json"
check export-window 0 "$cli" export "$dir/a" -o "$dir/window.json" --steps 1-2 --ranks 1
check export-window-holds-only-it 0 python3 -c 'import json,sys
e = json.load(open(sys.argv[1]))["traceEvents"]
steps = {x["args"]["step"] for x in e if x["ph"] in "Xi" and "step" in x.get("args", {})}
assert steps == {1, 2}, steps
assert {x["pid"] for x in e} == {1}, {x["pid"] for x in e}' "$dir/window.json"
check export-gzip 0 "$cli" export "$dir/a" -o "$dir/trace.json.gz"
check export-gzip-is-the-trace 0 python3 -c 'import gzip,json,sys; assert json.load(gzip.open(sys.argv[1])) == json.load(open(sys.argv[2]))' "$dir/trace.json.gz" "$dir/trace.json"
check export-bad-steps 2 "$cli" export "$dir/a" -o "$dir/x.json" --steps 3-1
expect export-bad-steps-message "^meshscope: --steps 3-1: not a step range"
check export-bad-ranks 2 "$cli" export "$dir/a" -o "$dir/x.json" --ranks 0,x
check export-missing 3 "$cli" export "$dir/absent" -o "$dir/t.json"
# torch-profiler: a file per rank in a folder, named HOST_PID.NS.pt.trace.json
# as torch.profiler names them; HTA itself: capture.profiler_export
check export-per-rank 0 "$cli" export "$dir/a" --format torch-profiler -o "$dir/pt" --steps 1-2
expect export-per-rank-names "^$dir/pt/[^/]+_[0-9]+\.[0-9]+\.pt\.trace\.json$"
check export-per-rank-files 0 python3 -c 'import json,pathlib,sys
files = sorted(pathlib.Path(sys.argv[1]).iterdir())
assert len(files) == 2, files
for f in files:
    d = json.loads(f.read_text())
    assert f.read_text().splitlines()[0].count("\"rank\": ") == 1
    steps = {x["name"] for x in d["traceEvents"] if x["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#1", "ProfilerStep#2"}, steps' "$dir/pt"
check export-per-rank-refuses-full-folder 2 "$cli" export "$dir/a" --format torch-profiler -o "$dir/pt"
expect export-per-rank-refusal-says-why "^meshscope: $dir/pt: holds 2 trace files already"
check export-per-rank-gzip 0 "$cli" export "$dir/a" --format torch-profiler --gzip --ranks 0 -o "$dir/ptz"
expect export-per-rank-gzip-name "^$dir/ptz/[^/]+_[0-9]+\.[0-9]+\.pt\.trace\.json\.gz$"
check export-gzip-flag-needs-per-rank 2 "$cli" export "$dir/a" --gzip -o "$dir/x.json"
check export-per-rank-into-a-file 2 "$cli" export "$dir/a" --format torch-profiler -o "$dir/trace.json"
expect export-per-rank-into-a-file-says-why "^meshscope: $dir/trace.json: not a folder"
"$cli" synth -o "$dir/b" --ranks 2 --steps 4 --layers 2 --incidents-per-step 4 >/dev/null
# Outputs never land on the run they read; a selection of nothing, or a
# name no format has, is refused (issue #45).
before=$(sha256sum "$dir/a/rank-00000.msdb" "$dir/a/manifest.json")
check report-onto-rank-file 2 "$cli" report "$dir/a" --format html -o "$dir/a/rank-00000.msdb"
expect report-onto-rank-file-says "^meshscope: $dir/a/rank-00000.msdb: is a file of the run being read"
check export-onto-rank-file 2 "$cli" export "$dir/a" -o "$dir/a/rank-00001.msdb"
check export-onto-manifest 2 "$cli" export "$dir/a" -o "$dir/a/../a/manifest.json"
ln -s "$dir/a/rank-00000.msdb" "$dir/alias.json"
check export-onto-a-link-to-a-rank-file 2 "$cli" export "$dir/a" -o "$dir/alias.json"
check run-files-untouched 0 bash -c '[[ "$(sha256sum "$1" "$2")" == "$3" ]]' _ "$dir/a/rank-00000.msdb" "$dir/a/manifest.json" "$before"
check report-unknown-extension 2 "$cli" report "$dir/a" -o "$dir/r.txt"
expect report-unknown-extension-says "^meshscope: $dir/r.txt: no report format has its extension \(.html, .md"
check report-unknown-extension-wrote-nothing 1 test -e "$dir/r.txt"
check report-txt-with-format 0 "$cli" report "$dir/a" --format md -o "$dir/r.txt"
check export-no-such-rank 2 "$cli" export "$dir/a" -o "$dir/x.json" --ranks 7
expect export-no-such-rank-says "^meshscope: --ranks 7: no such rank in $dir/a \(its ranks: 0,1\)"
check export-no-such-steps 2 "$cli" export "$dir/a" -o "$dir/x.json" --steps 50-60
expect export-no-such-steps-says "^meshscope: --steps 50-60: nothing was recorded in these steps"
check export-nothing-wrote-nothing 1 test -e "$dir/x.json"
echo keep > "$dir/victim"
ln -s "$dir/victim" "$dir/out.md.partial"
check report-over-a-planted-temporary 0 "$cli" report "$dir/a" -o "$dir/out.md"
check planted-temporary-target-untouched 0 grep -qx keep "$dir/victim"

check diff-same 0 "$cli" diff "$dir/a" "$dir/a"
expect diff-same-text "no differences"
check diff-other 1 "$cli" diff "$dir/a" "$dir/b"
expect diff-changed "^~ changed"

# merge: two nodes' halves of a 4-rank run
"$cli" synth -o "$dir/whole" --ranks 4 --steps 2 >/dev/null
mkdir -p "$dir/node0" "$dir/node1"
cp "$dir/whole"/rank-0000[01].msdb "$dir/node0/" && cp "$dir/whole"/rank-0000[23].msdb "$dir/node1/"
for n in 0 1; do
  python3 - "$dir/whole/manifest.json" "$dir/node$n/manifest.json" "$n" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); n = int(sys.argv[3])
m["ranks"] = [2 * n, 2 * n + 1]
json.dump(m, open(sys.argv[2], "w"))
PY
done
check merge 0 "$cli" merge "$dir/node0" "$dir/node1" -o "$dir/merged"
expect merge-line "merged 4 rank\(s\) \(0,1,2,3\) of world size 4"
check merged-summary 0 "$cli" summary "$dir/merged"
expect merged-ranks "ranks readable 4"
check merge-existing 2 "$cli" merge "$dir/node0" -o "$dir/merged"
check merge-duplicate 3 "$cli" merge "$dir/node0" "$dir/node0" -o "$dir/dup"
expect merge-duplicate-message "rank 0 is also in"
printf '{"stop_signal": null, "ranks": [{"rank": 0, "pid": 11, "ended": "exited with 0"}, {"rank": 1, "pid": 12, "ended": "killed by SIGKILL"}]}\n' > "$dir/node0/launch.json"
check merge-partial 0 "$cli" merge "$dir/node0" -o "$dir/half"
expect merge-partial-warning "rank\(s\) 2,3 are in none of the inputs"
check merge-carries-launch 0 python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [r["pid"] for r in d["ranks"]] == [11, 12], d' "$dir/half/launch.json"
cp -r "$dir/node1" "$dir/other" && python3 -c 'import json,sys; p=sys.argv[1]; m=json.load(open(p)); m["run_id"]="another"; json.dump(m,open(p,"w"))' "$dir/other/manifest.json"
check merge-other-run 3 "$cli" merge "$dir/node0" "$dir/other" -o "$dir/mixed"
# the second node recorded without the first one's run id: its own run
"$cli" synth -o "$dir/second" --ranks 4 --steps 2 >/dev/null
mkdir -p "$dir/node1b" && cp "$dir/second"/rank-0000[23].msdb "$dir/node1b/"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["ranks"]=[2,3]; json.dump(m,open(sys.argv[2],"w"))' "$dir/second/manifest.json" "$dir/node1b/manifest.json"
check merge-two-run-ids 3 "$cli" merge "$dir/node0" "$dir/node1b" -o "$dir/mixed"
expect merge-two-run-ids-says-how "^meshscope: $dir/node1b: belongs to run .*, but $dir/node0 to run .* \(record every node of a job with the same --run-id"

# Many ranks under a small soft limit of open files: each reader of a closed
# rank file holds that file (one not closed its -wal and -shm too), so 48
# closed ranks need about 50 descriptors; meshscope raises the soft limit to
# the hard one, and past the hard one says how.
"$cli" synth -o "$dir/many" --ranks 48 --steps 4 --layers 1 --straggler 7 --straggler-ms 5 >/dev/null
check many-ranks-low-soft-limit 1 bash -c 'ulimit -Sn 32; "$0" check "$1" --fail-on straggler' "$cli" "$dir/many"
expect many-ranks-straggler "^straggler: rank 7 is the slowest rank in 4 of 4 steps"
check many-ranks-closed-low-hard-limit 1 bash -c 'ulimit -Sn 64; ulimit -Hn 64; "$0" check "$1"' "$cli" "$dir/many"
check many-ranks-low-hard-limit 3 bash -c 'ulimit -Sn 32; ulimit -Hn 32; "$0" check "$1"' "$cli" "$dir/many"
expect many-ranks-says-the-limit "Too many open files \(each rank holds its file open, 3 files while it is written: raise the limit"

# Ranks verified side by side: two of four damaged past their headers are
# named in rank order, and --partial reads the other two.
"$cli" synth -o "$dir/verify" --ranks 4 --steps 3 --layers 2 --incidents-per-step 1 >/dev/null
python3 -c 'import sqlite3, sys
for r in (1, 3):
    db = sqlite3.connect(f"{sys.argv[1]}/rank-0000{r}.msdb")
    db.execute("UPDATE op_chunks SET data = x'"'"'00ff00ff'"'"'")
    db.commit()' "$dir/verify"
check verify-damaged 3 "$cli" check "$dir/verify"
check verify-damaged-in-rank-order 0 bash -c '"$1" check "$2" 2>&1 | grep -o "rank-0000[0-9].msdb: corrupt" | tr "\n" " "' _ "$cli" "$dir/verify"
expect verify-damaged-named-in-rank-order "^rank-00001.msdb: corrupt rank-00003.msdb: corrupt $"
check verify-damaged-partial 1 "$cli" check --partial "$dir/verify"
expect verify-damaged-partial-skips-rank-1 "rank-00001.msdb: corrupt op chunk .* \(skipped\)"
expect verify-damaged-partial-skips-rank-3 "rank-00003.msdb: corrupt op chunk .* \(skipped\)"
check verify-damaged-partial-summary 0 "$cli" summary --partial "$dir/verify"

finish
