"""`meshscope export --format torch-profiler` as a user takes it to HTA
(HolisticTraceAnalysis, https://github.com/facebookresearch/HolisticTraceAnalysis)
and to TensorBoard's profiler plugin (torch-tb-profiler,
https://github.com/pytorch/kineto/tree/main/tb_plugin): a recorded two-rank
run becomes one torch.profiler trace file per rank, named as torch.profiler's
tensorboard_trace_handler names its files; HTA's TraceAnalysis loads the
folder with the right rank per file, the optimizer steps as its iterations
and the recorded ops as CPU ops, and the plugin's loader makes a profile per
rank with its overview (one row per step), operator and trace views."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import PYTHON, cli, record

TORCH_PROFILER_SCRIPT = """
import sys, torch
from torch.profiler import profile, tensorboard_trace_handler
with profile(activities=[torch.profiler.ProfilerActivity.CPU],
             on_trace_ready=tensorboard_trace_handler(sys.argv[1])) as p:
    torch.ones(4).add(1)
"""


def export(run_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), "export", str(run_dir), "--format", "torch-profiler",
                           "-o", str(out), *extra], capture_output=True, text=True)


def shape(name: str) -> str:
    return re.sub(r"\d+", "N", name)


# The plugin's RunLoader parses each worker's file in a spawned process: run
# it from `python -c`, which spawned children do not re-run.
TB_PLUGIN_LOAD = """
import json, sys, tempfile
from torch_tb_profiler import io
from torch_tb_profiler.profiler.loader import RunLoader
run = RunLoader("meshscope", sys.argv[1], io.Cache(tempfile.mkdtemp())).load()
out = {}
for worker in run.workers:
    for span in run.get_spans(worker) or [None]:
        p = run.get_profile(worker, span)
        out[worker] = {"views": [v.name for v in p.views],
                       "steps": [row[0] for row in p.overview["steps"]["rows"]],
                       "ops": [row["name"] for row in p.operation_table_by_name["data"]]}
print(json.dumps(out))
"""


def hta_load(folder: Path):
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=str(folder))


def test_hta_loads_the_per_rank_export(tmp_path: Path) -> None:
    rec = record(tmp_path, "s2_optimizer", "auto")
    assert rec.proc.returncode == 0, rec.stderr
    out = tmp_path / "traces"
    done = export(rec.run_dir, out)
    assert done.returncode == 0, done.stderr
    files = [Path(line) for line in done.stdout.split()]
    assert sorted(files) == sorted(out.iterdir()) and len(files) == 2

    # torch.profiler's own file name on this machine, to compare shapes
    theirs = tmp_path / "torch-profiler"
    subprocess.run([PYTHON, "-c", TORCH_PROFILER_SCRIPT, str(theirs)], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True)
    (reference,) = [p.name for p in theirs.iterdir()]
    pids = {r["rank"]: int(r["meta"]["pid"]) for r in rec.ranks()}
    for f in files:
        assert shape(f.name) == shape(reference), (f.name, reference)
        header = json.loads(f.read_text())
        assert f.name.split(".")[0].endswith(f"_{pids[header['distributedInfo']['rank']]}")

    analysis = hta_load(out)
    assert sorted(analysis.t.traces) == [0, 1]
    for rank, path in analysis.t.trace_files.items():
        assert json.loads(Path(path).read_text())["distributedInfo"]["rank"] == rank

    # HTA's iterations are the run's optimizer steps
    steps = [s["step"] for s in rec.ranks()[0]["optimizer_steps"]]
    assert len(steps) == 4
    assert [int(s) for s in analysis.get_profiler_steps()] == steps

    names = analysis.t.symbol_table.get_sym_table()
    for detail in rec.ranks():
        df = analysis.t.get_trace(detail["rank"])
        cpu_ops = df[df["cat"].map(lambda i: names[i]) == "cpu_op"]
        op_names = set(cpu_ops["name"].map(lambda i: names[i]))
        recorded = set(detail["op_names"]) | set(detail["collectives"])
        assert op_names <= recorded, op_names - recorded
        # the incidents' ops (seed 003: the optimizer's foreach updates) are
        # there; one promoted to scalars ran as its ScalarList overload
        incident_ops = {i["op"] for i in detail["incidents"]} & set(detail["op_names"])
        assert "aten::_foreach_add_.List" in incident_ops and incident_ops <= op_names
        # every op HTA keeps is inside one of the steps, numbered as recorded
        in_steps = cpu_ops[cpu_ops["iteration"] >= 0]
        assert len(in_steps) > 0.9 * len(cpu_ops)
        assert set(in_steps["iteration"]) <= set(steps)

    # TensorBoard's profiler plugin: a profile per rank (worker HOST_PID)
    loaded = subprocess.run([PYTHON, "-c", TB_PLUGIN_LOAD, str(out)], capture_output=True,
                            text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    profiles = json.loads(loaded.stdout.splitlines()[-1])
    hosts = {r["rank"]: r["meta"]["hostname"] for r in rec.ranks()}
    assert sorted(profiles) == sorted(f"{hosts[r]}_{pid}" for r, pid in pids.items())
    for detail in rec.ranks():
        profile = profiles[f"{hosts[detail['rank']]}_{pids[detail['rank']]}"]
        assert {"overall", "operator", "trace"} <= set(profile["views"])
        assert {str(s) for s in steps} <= set(profile["steps"])
        assert "aten::_foreach_add_.List" in profile["ops"]
        assert set(profile["ops"]) <= set(detail["op_names"]) | set(detail["collectives"])

    # --gzip: the files torch.profiler writes with use_gzip=True, same content
    zipped = tmp_path / "zipped"
    done = export(rec.run_dir, zipped, "--gzip")
    assert done.returncode == 0, done.stderr
    for f in files:
        z = zipped / (f.name + ".gz")
        assert json.load(gzip.open(z)) == json.loads(f.read_text())
    assert sorted(hta_load(zipped).t.traces) == [0, 1]

    # a folder that holds traces already is refused: HTA would mix them in
    again = export(rec.run_dir, out)
    assert again.returncode == 2
    assert re.match(rf"meshscope: {re.escape(str(out))}: holds 2 trace files already", again.stderr)
    assert sorted(out.iterdir()) == sorted(files)


if __name__ == "__main__":
    sys.exit("run through pytest")
