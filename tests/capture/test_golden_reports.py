"""Golden end-to-end reports: record a seed scenario with `meshscope record`,
write its JSON and Markdown reports with `meshscope report`, and compare them
with the reviewed files in golden/ after normalizing what differs between
machines and runs (run ids, times, hosts, absolute paths, fingerprint values;
which fingerprints are equal is kept).

    MESHSCOPE_UPDATE_GOLDEN=1 ctest -R capture.golden   # rewrite, then review the diff
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import meshscope
from conftest import cli, record

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[2]

# (scenario, policy): what the report must show
CASES = [
    ("s1_input_batch", "replicate"),  # per-rank batches replicated: INVALID
    ("s1_input_batch", "auto"),       # promoted with Shard(0): clean
    ("s2_optimizer", "auto"),         # optimizer scalars: verified across ranks
    ("s3_dataloader", "observe"),     # raised: unreconciled
]

# Keys whose values are times, hosts or ids of one recording.
VOLATILE = {"first_ns", "last_ns", "hostname", "run_id", "time_ns", "seq"}
FINGERPRINT = re.compile(r"\b[0-9a-f]{16}\b")
# How a rank that did not end cleanly ended depends on which rank failed first
# (the launcher stops the others): "exited with 1" one time, "killed by
# SIGTERM" the next. Where each rank stopped keeps that it did not end cleanly.
ABNORMAL_END = re.compile(r"\b(?:exited with [1-9][0-9]*|killed by SIG[A-Z0-9]+)")


class Normalizer:
    def __init__(self) -> None:
        self.fingerprints: dict[str, str] = {}

    def text(self, s: str) -> str:
        s = re.sub(r"/[^\s\"'`|]*/site-packages/", "<site-packages>/", s)
        s = s.replace(str(REPO), "<repo>")
        s = re.sub(r"(<site-packages>/[^\s\"'`|:]*):\d+", r"\1:N", s)
        s = ABNORMAL_END.sub("<ended abnormally>", s)
        return FINGERPRINT.sub(self._fingerprint, s)

    def _fingerprint(self, m: re.Match[str]) -> str:
        return self.fingerprints.setdefault(m.group(0), f"<fp{len(self.fingerprints) + 1}>")

    def json(self, value, key: str = ""):
        if key in VOLATILE:
            return "<volatile>"
        if isinstance(value, dict):
            return {k: self.json(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if key == "line" and isinstance(value, int):
            return value
        return value


def time_structure(time: dict) -> dict:
    """The JSON report's "time" less what a clock measured: which ops ran
    how often on how many ranks with which placements, and how many steps
    each rank recorded. Who was slowest is a race on two CPU ranks."""
    ops = [{k: o[k] for k in ("name", "collective", "count", "bytes", "ranks", "placements",
                               "more_placements")} for o in time["ops"]]
    ranks = sorted(({"rank": r["rank"], "steps": r["steps"], "incidents": r["incidents"],
                     "cells": len(r["cells"])} for r in time["ranks"]), key=lambda r: r["rank"])
    return {"ops": sorted(ops, key=lambda o: (o["collective"], o["name"])),
            "columns": time["columns"], "steps_per_column": time["steps_per_column"],
            "ranks": ranks, "steps_compared": len(time["slowest"])}


def report(run_dir: Path, fmt: str, out: Path) -> str:
    proc = subprocess.run([cli(), "report", str(run_dir), "--format", fmt, "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


def compare(name: str, got: str) -> None:
    path = GOLDEN / name
    if os.environ.get("MESHSCOPE_UPDATE_GOLDEN"):
        path.write_text(got)
        return
    assert path.exists(), f"{path} missing: run with MESHSCOPE_UPDATE_GOLDEN=1 and review it"
    want = path.read_text()
    if got != want:
        diff = subprocess.run(["diff", "-u", str(path), "-"], input=got, text=True,
                              capture_output=True).stdout
        pytest.fail(f"{name} differs from the reviewed report:\n{diff[:6000]}")


@pytest.mark.parametrize("scenario,policy", CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_reports_match_reviewed_output(tmp_path, scenario, policy):
    rec = record(tmp_path, scenario, policy)
    assert rec.run_dir.exists(), rec.stderr[-3000:]
    n = Normalizer()
    data = json.loads(report(rec.run_dir, "json", tmp_path / "report.json"))
    data["time"] = time_structure(data["time"])
    compare(f"{scenario}-{policy}.json", json.dumps(n.json(data), indent=1, sort_keys=True) + "\n")
    md = report(rec.run_dir, "md", tmp_path / "report.md")
    md = re.sub(r"run ` [0-9a-f-]+ `", "run ` <run-id> `", md)
    # where the time goes: measured times, compared by structure in the JSON
    md, timed = md.split("\n## Where the time goes\n")
    assert "| op | calls | total | mean | max | ranks |" in timed
    compare(f"{scenario}-{policy}.md", n.text(md))

    # One explanation per incident: the JSON report's group examples, the
    # HTML report and load_run() show the same one (less what only a group
    # knows: its scope and cross-rank verdict).
    run = meshscope.load_run(rec.run_dir)
    loaded = {(r["rank"], inc["seq"]): inc["explanation"]
              for r in run["rank_details"] for inc in r["incidents"]}
    html_text = report(rec.run_dir, "html", tmp_path / "report.html")
    for group in data["groups"]:
        ex = group["example"]
        explained = dict(ex["explanation"], fix_scope="", verdict="")
        assert loaded[(ex["rank"], ex["seq"])] == explained
        assert explained["summary"].startswith(ex["op"] + " got operand")
        assert html.escape(explained["summary"]).replace("&#x27;", "&#39;") in html_text
