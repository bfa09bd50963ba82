#!/usr/bin/env bash
# meshscope-gui --screenshot always ends (issue #32): a shown result (exit 0,
# the PNG) or a shown error (exit 3, the error on stderr), for a run whose
# analysis fails, a run with no readable rank, a missing run, a FIFO named
# manifest.json and a huge world size. Run under xvfb.sh.
#   screenshot_exit.sh MESHSCOPE_GUI MESHSCOPE
set -uo pipefail
gui=$1 cli=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../app/cli_lib.sh"
shot() { (ulimit -v 4194304 && timeout 120 "$gui" "$1" --screenshot "$dir/$2.png"); }
sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$1" "$2"; }
"$cli" synth -o "$dir/base" --ranks 2 --steps 3 --layers 2 --incidents-per-step 2 >/dev/null
fresh() { rm -rf "$dir/$1"; cp -r "$dir/base" "$dir/$1"; }

check good-run 0 shot "$dir/base" good
[[ -s "$dir/good.png" ]] || { echo "FAIL good-run: no PNG"; failures=$((failures + 1)); }

fresh analysis
sql "$dir/analysis/rank-00000.msdb" "UPDATE op_chunks SET count=1024;"
check analysis-fails 3 shot "$dir/analysis" analysis
expect analysis-fails-says-why "^meshscope-gui: analysis: .*rank-00000.msdb: corrupt op chunk"

fresh unreadable
printf garbage >"$dir/unreadable/rank-00000.msdb"
printf garbage >"$dir/unreadable/rank-00001.msdb"
check no-readable-rank 3 shot "$dir/unreadable" unreadable
expect no-readable-rank-says-why "^meshscope-gui: cannot open the run: .*no readable rank file"
expect no-readable-rank-names-file "rank-00001.msdb: not a meshscope rank file"

check missing-run 3 shot "$dir/absent" absent
expect missing-run-says-why "^meshscope-gui: cannot open the run: .*absent: no such file"

fresh fifo
rm "$dir/fifo/manifest.json" && mkfifo "$dir/fifo/manifest.json"
check fifo-manifest 0 shot "$dir/fifo" fifo
expect fifo-manifest-problem "^meshscope-gui: problem: .*manifest.json: is a FIFO, not a regular file"

fresh world
python3 -c 'import json,sys; p=sys.argv[1]; m=json.load(open(p)); m["world_size"]=2147483647; json.dump(m,open(p,"w"))' "$dir/world/manifest.json"
check huge-world-size 0 shot "$dir/world" world

# An op whose name id is far beyond the strings table: the timeline keeps
# names by id in a map, not in a vector sized by the id.
fresh name-id
PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/../fuzz" python3 -c 'import sys, value_fuzz
value_fuzz.set_first_op(sys.argv[1], "name", 2**32 + 2)' "$dir/name-id/rank-00000.msdb"
check huge-op-name-id 0 shot "$dir/name-id" name-id

finish
