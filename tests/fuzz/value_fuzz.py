#!/usr/bin/env python3
"""Value-level fuzzer of the run readers (issue #32), beside the byte-level one.

The byte-level fuzzer (fuzz_rank_reader.cpp) damages files; this one keeps
them well-formed and puts hostile values where values go: every numeric and
text column of every table of a rank file (INT64 extremes, 0, negatives,
huge ids and counts, NaN and infinities, invalid UTF-8, very long strings,
control characters, values of the wrong type), the ops inside op chunks
(decoded, changed and encoded again, with or without their bounds), every
meta key, every manifest.json field and launch.json. Each case starts from a
copy of a real run and runs every read-only CLI subcommand (and, with --gui,
meshscope-gui --screenshot) under a memory limit and a timeout.

A failure is a crash (a signal), a hang (the timeout), running out of
memory, an exit code other than 0, 1 (findings) and 3 (unreadable run), an
exit 3 without a message, or a raw control character on the terminal. A
clear error with exit 3 is a pass.

    value_fuzz.py --cli meshscope [--gui meshscope-gui] --run DIR... \
        [--cases N | --seconds S] [--seed K] [--keep DIR]

Deterministic for a given --seed and seed runs (--cases); prints one line
per failure and a last line with cases, commands, crashes, hangs, OOMs.
"""

import argparse
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Integers a damaged or hostile writer could leave in any integer column.
HOSTILE_INTS = [
    INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 0, -1, 1, -5, 2,
    2**31 - 1, -(2**31), 2**32 + 2, 2**53 + 1, 40 * 2**24, 2**62, -(2**62), 1024, 1025,
    10**7, 65535, 65536,
]
HOSTILE_REALS = [float("nan"), float("inf"), float("-inf"), -0.0, 1e308, -1e308, 5e-324, 1e30]


def hostile_texts(rng):
    return [
        "",
        "\x1b[31mred\x1b[0m",
        "line\nbreak\rreturn\ttab",
        "\x00nul",
        "\x07bell\x08\x7f\u009b31m",
        "</script><img src=x onerror=alert(1)>",
        "'; DROP TABLE strings; --",
        "1e30",
        "-9223372036854775808",
        "x" * rng.choice([1000, 100000, 1 << 20]),
        "\u202etxt.exe",
        "{\"json\": [1, 2]}",
        "rank-00000.msdb",
    ]


INVALID_UTF8 = [b"\xff", b"inv\xff.py", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xe2\x82", b"\xc0\xaf"]

# Read-only subcommands, {run} the mutated run, {base} its seed, {out} a file.
COMMANDS = [
    ["info", "{run}"],
    ["summary", "{run}"],
    ["summary", "--json", "{run}"],
    ["summary", "--partial", "{run}"],
    ["check", "{run}"],
    ["check", "--partial", "{run}"],
    ["check", "--no-op-compare", "{run}"],
    ["report", "{run}", "--partial", "--format", "html", "-o", "{out}.html"],
    ["report", "{run}", "--partial", "--format", "md", "-o", "{out}.md"],
    ["report", "{run}", "--partial", "--format", "json", "-o", "{out}.json"],
    ["report", "{run}", "--partial", "--format", "csv", "-o", "{out}.csv"],
    ["report", "{run}", "--partial", "--format", "sarif", "-o", "{out}.sarif"],
    ["report", "{run}", "--format", "md", "-o", "-"],
    ["export", "{run}", "--partial", "-o", "{out}.trace.json"],
    ["diff", "{base}", "{run}", "--partial"],
    ["diff", "--json", "{run}", "{base}", "--partial"],
]
OK_EXITS = {0, 1, 3}


# ---- op chunks (core/store/op_chunk.cpp): zigzag varints ----

def put_varint(out, v):
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def put_signed(out, v):
    v &= (1 << 64) - 1
    signed = v - (1 << 64) if v >> 63 else v
    put_varint(out, ((signed << 1) ^ (signed >> 63)) & ((1 << 64) - 1))


def wrap64(v):
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


class Cursor:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def varint(self):
        v, shift = 0, 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def signed(self):
        v = self.varint()
        return wrap64((v >> 1) ^ -(v & 1))


OP_FIELDS = ["start", "end", "thread", "name", "phase", "step", "stack", "depth", "incident"]
SCALAR = 2  # OperandKind::Scalar: 8 bytes of double follow
OPERAND_FIELDS = ["index", "role", "kind", "tensor", "placements", "scalar"]


def decode_chunk(count, data):
    c, ops, start, step = Cursor(data), [], 0, 0
    for _ in range(count):
        start = wrap64(start + c.signed())
        op = {"start": start, "end": wrap64(start + c.signed()), "thread": c.varint(),
              "name": c.varint(), "phase": c.varint()}
        step = wrap64(step + c.signed())
        op.update(step=step, stack=c.varint(), depth=c.varint(), incident=c.varint(), operands=[])
        for _ in range(c.varint()):
            o = {"index": c.varint(), "role": c.varint(), "kind": c.varint(), "tensor": c.varint(),
                 "placements": c.varint()}
            if o["kind"] == SCALAR:
                o["scalar"] = struct.unpack("<d", data[c.pos:c.pos + 8])[0]
                c.pos += 8
            op["operands"].append(o)
        ops.append(op)
    return ops


def encode_chunk(ops):
    out, prev_start, prev_step = bytearray(), 0, 0
    for op in ops:
        put_signed(out, op["start"] - prev_start)
        put_signed(out, op["end"] - op["start"])
        for key in ("thread", "name", "phase"):
            put_varint(out, op[key])
        put_signed(out, op["step"] - prev_step)
        for key in ("stack", "depth", "incident"):
            put_varint(out, op[key])
        put_varint(out, len(op["operands"]))
        for o in op["operands"]:
            for key in ("index", "role", "kind", "tensor", "placements"):
                put_varint(out, o[key])
            if o["kind"] == SCALAR:
                out += struct.pack("<d", o.get("scalar", 0.0))
        prev_start, prev_step = op["start"], op["step"]
    return bytes(out)


def chunk_bounds(ops):
    return (min(o["start"] for o in ops), max(o["start"] for o in ops),
            max(o["end"] for o in ops), min(o["step"] for o in ops), max(o["step"] for o in ops))


def set_first_op(rank_file, field, value):
    """Sets one field of the first op of a rank file (for tests), bounds kept."""
    db = sqlite3.connect(rank_file)
    first, count, data = db.execute(
        "SELECT first_seq, count, data FROM op_chunks ORDER BY first_seq LIMIT 1").fetchone()
    ops = decode_chunk(count, data)
    ops[0][field] = value
    db.execute("UPDATE op_chunks SET data=? WHERE first_seq=?", (encode_chunk(ops), first))
    db.commit()
    db.close()


# ---- mutations ----

class Mutator:
    """Applies one hostile value to a copy of a run; describe() says what."""

    def __init__(self, rng, run_dir):
        self.rng, self.run = rng, Path(run_dir)
        self.ranks = sorted(self.run.glob("rank-*.msdb"))

    def integer(self):
        r = self.rng.random()
        if r < 0.8:
            return self.rng.choice(HOSTILE_INTS)
        return self.rng.randint(-(2**40), 2**40)

    def column_value(self, declared):
        """A value for a column: mostly of its type, sometimes of another."""
        r = self.rng.random()
        if r < 0.12:
            return ("real", self.rng.choice(HOSTILE_REALS))
        if r < 0.22:
            return ("text", self.rng.choice(hostile_texts(self.rng)))
        if r < 0.30:
            return ("bad-utf8", self.rng.choice(INVALID_UTF8))
        if r < 0.34:
            return ("null", None)
        if r < 0.38:
            return ("blob", bytes(self.rng.randrange(256) for _ in range(self.rng.choice([0, 1, 9, 64]))))
        if "INT" in declared:
            return ("int", self.integer())
        if "TEXT" in declared:
            return ("text", self.rng.choice(hostile_texts(self.rng)))
        if "REAL" in declared:
            return ("real", self.rng.choice(HOSTILE_REALS))
        return ("int", self.integer())

    @staticmethod
    def sql_value(kind, value):
        """SQL text and parameters that store exactly this value and type."""
        if kind == "bad-utf8":
            return "CAST(? AS TEXT)", [value]
        if kind == "real" and value != value:
            return "(9e999 - 9e999)", []  # NaN: SQLite stores NULL
        return "?", [value]

    def mutate(self):
        choices = [self.table_column] * 6 + [self.op_chunk] * 3 + [self.meta] * 2 + \
            [self.manifest] * 2 + [self.launch, self.string_ids, self.delete_rows]
        chosen = self.rng.choice(choices)
        try:
            return chosen()
        except (sqlite3.Error, ValueError, TypeError, KeyError, IndexError, struct.error) as e:
            # an earlier change of the same case left nothing this one can change
            return f"{chosen.__name__} skipped ({type(e).__name__}: {e})"[:120]

    def connect(self):
        rank = self.rng.choice(self.ranks)
        db = sqlite3.connect(rank)
        # an earlier mutation of this case may have stored invalid UTF-8
        db.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
        return rank, db

    def rows_clause(self, db, table):
        r = self.rng.random()
        if r < 0.4:
            return "", []
        rowids = [row[0] for row in db.execute(f"SELECT rowid FROM {table}")] \
            if not self.without_rowid(db, table) else []
        if not rowids:
            return "", []
        return " WHERE rowid = ?", [self.rng.choice(rowids)]

    @staticmethod
    def without_rowid(db, table):
        sql = db.execute("SELECT sql FROM sqlite_schema WHERE name=?", (table,)).fetchone()[0]
        return "WITHOUT ROWID" in sql.upper()

    def table_column(self):
        rank, db = self.connect()
        tables = [t for (t,) in db.execute(
            "SELECT name FROM sqlite_schema WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        table = self.rng.choice(tables)
        columns = [(c[1], (c[2] or "").upper()) for c in db.execute(f"PRAGMA table_info({table})")]
        column, declared = self.rng.choice(columns)
        kind, value = self.column_value(declared)
        where, params = self.rows_clause(db, table)
        expr, vparams = self.sql_value(kind, value)
        try:
            db.execute(f"UPDATE OR IGNORE {table} SET {column} = {expr}{where}", vparams + params)
            db.commit()
        except sqlite3.Error as e:  # NOT NULL and the like: the value cannot be stored
            db.close()
            return f"{rank.name} {table}.{column} = {kind} (refused by SQLite: {e})"
        db.close()
        shown = repr(value)[:40]
        return f"{rank.name} {table}.{column} = {kind} {shown}{' (one row)' if where else ''}"

    def op_chunk(self):
        rank, db = self.connect()
        rows = db.execute("SELECT first_seq, count, data FROM op_chunks").fetchall()
        if not rows:
            db.close()
            return f"{rank.name}: no op chunks"
        first, count, data = self.rng.choice(rows)
        try:
            ops = decode_chunk(count, data)
        except (IndexError, TypeError, ValueError, struct.error):
            db.close()
            return f"{rank.name}: chunk {first} already damaged"
        op = self.rng.choice(ops)
        what = self.rng.choice(OP_FIELDS + ["operand"])
        if what == "operand" and op["operands"]:
            o = self.rng.choice(op["operands"])
            field = self.rng.choice(OPERAND_FIELDS)
            if field == "scalar":
                o["kind"] = SCALAR
                o["scalar"] = self.rng.choice(HOSTILE_REALS)
            else:
                o[field] = self.integer() & ((1 << 64) - 1)
            desc = f"operand {field}"
        else:
            what = "start" if what == "operand" else what
            op[what] = self.integer() if what in ("start", "end", "step") else \
                self.integer() & ((1 << 64) - 1)
            desc = f"{what} = {op[what]}"
        data = encode_chunk(ops)
        keep_bounds = self.rng.random() < 0.3  # else the bounds follow, so the ops are read
        if keep_bounds:
            db.execute("UPDATE op_chunks SET data=? WHERE first_seq=?", (data, first))
        else:
            bounds = chunk_bounds(ops)
            db.execute("UPDATE op_chunks SET data=?, min_start_ns=?, max_start_ns=?, max_end_ns=?,"
                       " min_step=?, max_step=? WHERE first_seq=?", (data, *bounds, first))
        db.commit()
        db.close()
        return f"{rank.name} op chunk {first}: op {desc}{' (bounds kept)' if keep_bounds else ''}"

    def meta(self):
        rank, db = self.connect()
        keys = [k for (k,) in db.execute("SELECT key FROM meta")]
        key = self.rng.choice(keys)
        if self.rng.random() < 0.15:
            db.execute("DELETE FROM meta WHERE key=?", (key,))
            desc = "deleted"
        else:
            r = self.rng.random()
            if r < 0.55:
                value = str(self.rng.choice(HOSTILE_INTS + ["1e30", "2x", "", " 7", "0x10", "+3"]))
                db.execute("UPDATE meta SET value=? WHERE key=?", (value, key))
            elif r < 0.8:
                value = self.rng.choice(hostile_texts(self.rng))
                db.execute("UPDATE meta SET value=? WHERE key=?", (value, key))
            else:
                value = self.rng.choice(INVALID_UTF8)
                db.execute("UPDATE meta SET value=CAST(? AS TEXT) WHERE key=?", (value, key))
            desc = repr(value)[:40]
        db.commit()
        db.close()
        return f"{rank.name} meta {key} {desc}"

    def json_value(self):
        r = self.rng.random()
        if r < 0.45:
            return self.integer() if self.rng.random() < 0.8 else self.rng.choice([2**64 + 5, -(2**70)])
        if r < 0.55:
            return self.rng.choice([1e30, -1e30, 2.5, 0.0, 1e308])
        if r < 0.75:
            return self.rng.choice(hostile_texts(self.rng))
        return self.rng.choice([None, True, [], {}, [0, 1, INT64_MAX], [-1], ["0"], {"a": 1},
                                list(range(self.rng.choice([3, 5000])))])

    def manifest(self):
        path = self.run / "manifest.json"
        m = json.loads(path.read_bytes().decode("utf-8", "surrogateescape"))
        key = self.rng.choice(sorted(m) + ["ranks", "world_size"])
        if self.rng.random() < 0.1:
            m.pop(key, None)
            desc = "deleted"
        elif key == "command" and self.rng.random() < 0.5:
            m[key] = [self.rng.choice(hostile_texts(self.rng)) for _ in range(3)]
            desc = "hostile arguments"
        else:
            m[key] = self.json_value()
            desc = repr(m[key])[:40]
        text = json.dumps(m, allow_nan=True)
        if self.rng.random() < 0.1:  # invalid UTF-8 inside a string
            text = text.replace('"run_id": "', '"run_id": "\udcff', 1)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        return f"manifest {key} {desc}"

    def launch(self):
        ranks = [{"rank": self.json_value(), "ended": self.rng.choice(hostile_texts(self.rng))}
                 for _ in range(self.rng.choice([1, 2, 3]))]
        doc = self.rng.choice([{"ranks": ranks}, {"ranks": self.json_value()}, ranks])
        (self.run / "launch.json").write_text(json.dumps(doc, allow_nan=True))
        return f"launch.json {repr(doc)[:50]}"

    def string_ids(self):
        """Rows with sparse huge ids, some of them referenced."""
        rank, db = self.connect()
        ids = [k * 2**24 for k in range(1, self.rng.choice([2, 10, 41]))] + [2**62, INT64_MAX]
        for i in ids:
            db.execute("INSERT OR REPLACE INTO strings VALUES (?, ?)", (i, f"far {i}"))
        column = self.rng.choice(["incidents.op_id", "incidents.evidence_id", "collectives.kind_id",
                                  "tensors.label_id", "stack_frames.file_id"])
        table, col = column.split(".")
        db.execute(f"UPDATE {table} SET {col}=?", (self.rng.choice(ids),))
        db.commit()
        db.close()
        return f"{rank.name} {len(ids)} sparse string ids, {column} refers to one"

    def delete_rows(self):
        rank, db = self.connect()
        table = self.rng.choice(["strings", "stack_frames", "tensors", "meshes", "incident_operands",
                                 "optimizer_steps", "collectives", "op_chunks"])
        db.execute(f"DELETE FROM {table} WHERE rowid % 2 = 0" if not self.without_rowid(db, table)
                   else f"DELETE FROM {table}")
        db.commit()
        db.close()
        return f"{rank.name} rows deleted from {table}"


# ---- running ----

def limits(memory_mb):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_one(argv, timeout, memory_mb, env=None):
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=limits(memory_mb), env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, False, time.monotonic() - start
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return proc.returncode, out, err, True, time.monotonic() - start


# C0 controls but the line feed; DEL does nothing on a terminal and JSON keeps it raw.
RAW_CONTROL = set(range(0x20)) - {0x0A}


def classify(rc, out, err, hung, terminal):
    """None for a pass, else the kind of failure."""
    if hung:
        return "hang"
    if b"bad_alloc" in err or b"out of memory" in err.lower():
        return "oom"
    if rc < 0:
        return "crash"
    if rc not in OK_EXITS:
        return "exit"
    if rc == 3 and not (out + err).strip():  # info prints its problems on stdout
        return "silent-error"
    if terminal and any(b in RAW_CONTROL for b in out + err):
        return "raw-control"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gui", help="meshscope-gui: also run --screenshot (needs a display)")
    ap.add_argument("--run", action="append", required=True, help="seed run directory")
    ap.add_argument("--cases", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30, help="seconds per CLI command")
    ap.add_argument("--gui-timeout", type=float, default=90)
    ap.add_argument("--memory-mb", type=int, default=1024, help="address space per CLI command")
    ap.add_argument("--gui-memory-mb", type=int, default=4096)
    ap.add_argument("--gui-every", type=int, default=1, help="run the GUI on every Nth case")
    ap.add_argument("--keep", help="copy failing cases here")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if not args.cases and not args.seconds:
        args.cases = 50
    gui = args.gui if args.gui and os.environ.get("DISPLAY") else None
    if args.gui and not gui:
        print("value fuzz: no DISPLAY, the GUI is left out", file=sys.stderr)

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="meshscope-value-fuzz-"))
    counts = {"cases": 0, "commands": 0, "crash": 0, "hang": 0, "oom": 0, "exit": 0,
              "silent-error": 0, "raw-control": 0}
    failures = []
    started = time.monotonic()
    try:
        case = 0
        while (args.cases and case < args.cases) or \
                (not args.cases and time.monotonic() - started < args.seconds):
            seed_run = Path(rng.choice(args.run))
            run = work / f"case-{case}"
            shutil.copytree(seed_run, run)
            mutator = Mutator(rng, run)
            changes = [mutator.mutate() for _ in range(rng.choice([1, 1, 2, 3]))]
            what = "; ".join(changes)
            if args.verbose:
                print(f"case {case}: {what}", flush=True)
            commands = [[args.cli] + [a.format(run=run, base=seed_run, out=work / "out") for a in c]
                        for c in COMMANDS]
            runs = [(c, args.timeout, args.memory_mb, True) for c in commands]
            if gui and case % args.gui_every == 0:
                runs.append(([gui, str(run), "--screenshot", str(work / "shot.png")],
                             args.gui_timeout, args.gui_memory_mb, False))
            failed_here = False
            for argv, timeout, memory, terminal in runs:
                rc, out, err, hung, secs = run_one(argv, timeout, memory)
                counts["commands"] += 1
                # what -o writes is a file format, not terminal text
                kind = classify(rc, out, err, hung, terminal and "-o" not in argv)
                if kind:
                    counts[kind] += 1
                    failed_here = True
                    first = (err.strip().splitlines() or [b""])[-1].decode("utf-8", "replace")
                    line = (f"FAIL {kind}: case {case} ({what}): "
                            f"{' '.join(os.path.basename(a) if a.startswith(str(work)) else a for a in argv[1:])}"
                            f": rc {rc}, {secs:.1f} s: {first[:200]}")
                    failures.append(line)
                    print(line, flush=True)
            if failed_here and args.keep:
                shutil.copytree(run, Path(args.keep) / f"case-{case}", dirs_exist_ok=True)
            shutil.rmtree(run, ignore_errors=True)
            counts["cases"] += 1
            case += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    bad = counts["exit"] + counts["silent-error"] + counts["raw-control"]
    print(f"value fuzz: {counts['cases']} cases, {counts['commands']} commands, "
          f"{counts['crash']} crashes, {counts['hang']} hangs, {counts['oom']} out-of-memory, "
          f"{bad} other failures (seed {args.seed}, {elapsed:.0f} s{', with the GUI' if gui else ''})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
