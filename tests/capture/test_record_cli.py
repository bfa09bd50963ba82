"""`meshscope record` as a user meets it at the edges: a training script
whose name is not UTF-8, a run directory that holds a run already, a
command that is not there, and a job in which nothing attached the agent.
In none of these may `record` say "run recorded" about a directory that
holds nothing from the job it ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import meshscope
from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli


def run_record(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), "record", *args], capture_output=True, text=True,
                          errors="replace", timeout=HANG_GUARD_S, cwd=cwd)


def test_a_script_name_that_is_not_utf8_is_recorded_and_shown_escaped(tmp_path):
    # bytes of a file name no UTF-8 decoder accepts: Python keeps them as
    # surrogates in sys.argv, which the agent could not hand to C++
    name = os.fsdecode(b"inv\xff.py")
    shutil.copy(SCENARIOS / "s0_clean.py", tmp_path / name)
    shutil.copy(SCENARIOS / "common.py", tmp_path / "common.py")
    run_dir = tmp_path / "run"
    proc = subprocess.run([cli(), "record", "-o", str(run_dir), "-n", "2", "--", PYTHON,
                           os.fsencode(tmp_path / name)],
                          capture_output=True, timeout=HANG_GUARD_S, cwd=tmp_path)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err[-3000:]
    assert "not recording" not in err, err[-3000:]
    assert "run recorded in" in err
    run = meshscope.load_run(run_dir)
    assert [r["rank"] for r in run["rank_details"]] == [0, 1]
    assert all(r["ops"] > 0 for r in run["ranks"])
    info = subprocess.run([cli(), "info", str(run_dir)], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    command = next(line for line in info.stdout.splitlines() if line.startswith("command"))
    # the job as typed: the interpreter too, the name's byte escaped
    assert command.split(None, 1)[1] == f"{PYTHON} {tmp_path}/inv\\xff.py", command


def test_recording_into_a_directory_that_holds_a_run_refuses_before_starting(tmp_path):
    run_dir = tmp_path / "run"
    first = run_record("-o", str(run_dir), "-n", "1", "--", PYTHON, "-c",
                       "import torch; print('first')", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before = sorted(p.name for p in run_dir.iterdir())
    assert "rank-00000.msdb" in before
    marker = tmp_path / "ran"
    again = run_record("-o", str(run_dir), "-n", "1", "--", PYTHON, "-c",
                       f"open({str(marker)!r}, 'w').close()", cwd=tmp_path)
    assert again.returncode == 2, again.stderr
    assert f"{run_dir} already holds a run (manifest.json, 1 rank file(s))" in again.stderr
    assert "run recorded" not in again.stderr
    assert not marker.exists(), "the job started"
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_command_that_is_not_there_exits_127_and_leaves_no_directory(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_record("-o", str(run_dir), "-n", "1", "--", "meshscope-no-such-command",
                      cwd=tmp_path)
    assert proc.returncode == 127, proc.stderr
    assert "cannot start 'meshscope-no-such-command': command not found" in proc.stderr
    assert not run_dir.exists()


def test_a_job_that_attached_nothing_is_not_called_recorded(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_record("-o", str(run_dir), "-n", "2", "--", "true", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "nothing was recorded" in proc.stderr
    assert "run recorded" not in proc.stderr and "not a meshscope run" not in proc.stderr
    assert not run_dir.exists(), "an empty run directory was left behind"
    failing = run_record("-o", str(run_dir), "-n", "1", "--", "false", cwd=tmp_path)
    assert failing.returncode == 1, failing.stderr  # the job's own code comes first
    assert "nothing was recorded" in failing.stderr


def test_the_rendezvous_port_is_free_and_below_the_kernels_ephemeral_range(tmp_path):
    """A port from the ephemeral range can be taken between record's check
    and rank 0's listen by any connection or listener on the machine (gloo's
    pairs of a job beside it): rank 0 then fails to start its store."""
    low = 32768
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except OSError:
        pass
    ports = set()
    for i in range(3):
        out = tmp_path / f"port{i}"
        proc = run_record("-o", str(tmp_path / f"run{i}"), "-n", "2", "--", "sh", "-c",
                          f'echo "$MASTER_ADDR:$MASTER_PORT" >> {out}', cwd=tmp_path)
        assert proc.returncode == 3, proc.stderr  # nothing attached: nothing recorded
        seen = set(out.read_text().split())
        assert len(seen) == 1, seen  # both ranks meet at one address
        addr, port = seen.pop().split(":")
        assert addr == "127.0.0.1" and 1024 < int(port) < low, (port, low)
        ports.add(port)
    assert len(ports) > 1, ports  # picked at random: two jobs rarely meet on one


def test_a_mistyped_policy_name_lists_the_names_and_suggests_one(tmp_path):
    proc = run_record("--policy", "autoo", "-n", "1", "--", "true", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "neither a policy name (observe, replicate, shard, scalar, strict, auto)" in proc.stderr
    assert proc.stderr.rstrip().endswith("did you mean auto?"), proc.stderr
    assert not (tmp_path / "meshscope-runs").exists()


def test_a_python_without_torch_says_why_each_rank_did_not_record(tmp_path):
    system = shutil.which("python3", path="/usr/bin:/bin")
    if not system or subprocess.run([system, "-c", "import torch"],
                                    capture_output=True).returncode == 0:
        pytest.skip("needs a python3 without torch")
    run_dir = tmp_path / "run"
    proc = run_record("-o", str(run_dir), "-n", "1", "--", system, "-c", "print('trained')",
                      cwd=tmp_path)
    assert "trained" in proc.stdout
    assert proc.returncode == 3, proc.stderr
    assert "meshscope: not recording pid" in proc.stderr and "torch" in proc.stderr
    assert "nothing was recorded" in proc.stderr and "run recorded" not in proc.stderr


def test_the_end_of_record_lists_each_call_site_and_what_to_run_next(tmp_path):
    """`auto` repairs every incident of s1; the end of `record` still names
    each call site with its op, origin, what the policy did and the fix, and
    the commands to go on with."""
    run_dir = tmp_path / "run"
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([cli(), "record", "-o", str(run_dir), "--policy", "auto", "-n", "2",
                           "--", PYTHON, "s1_input_batch.py"], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, cwd=SCENARIOS,
                          env={**os.environ, "SCENARIO_OUT": str(out)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    end = proc.stderr[proc.stderr.index("run recorded in"):]
    groups = end[end.index("incidents by call site"):end.index("next:")]
    lines = [line for line in groups.splitlines()[1:] if not line.lstrip().startswith("fix:")]
    assert lines and all("s1_input_batch.py:" in line for line in lines), groups
    assert any("origin D" in line and "sharded_from_local" in line for line in lines), groups
    assert "fix: distribute each batch" in groups
    assert f"meshscope check {run_dir}" in end and f"meshscope report {run_dir}" in end
    assert "--fail-on reconciled" in end
    # a CI gate can forbid code that runs only because the policy repaired it
    gate = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    gate = subprocess.run([cli(), "check", str(run_dir), "--fail-on", "reconciled"],
                          capture_output=True, text=True)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    found = gate.stdout.splitlines()
    assert found and all(line.startswith("reconciled: ") for line in found), gate.stdout
    assert any("s1_input_batch.py:" in line and "reconciled by the policy (sharded_from_local"
               in line and "; fix: distribute each batch" in line for line in found), gate.stdout


def test_secrets_on_the_command_line_are_not_kept_in_the_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_record("-o", str(run_dir), "-n", "1", "--", PYTHON, "-c", "import torch",
                      "--hf-token=hf_SECRET1", "--password", "SECRET2", "WANDB_API_KEY=SECRET3",
                      "--lr=0.1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = (run_dir / "manifest.json").read_text()
    run = meshscope.load_run(run_dir)
    meta = run["rank_details"][0]["meta"]["command"]
    for text in (kept, meta):
        assert "SECRET" not in text, text
        assert "--hf-token=<redacted>" in text and "--lr=0.1" in text
        assert "WANDB_API_KEY=<redacted>" in text


def test_a_file_limit_beyond_any_file_is_a_clear_error(tmp_path):
    proc = subprocess.run([cli(), "record", "-o", str(tmp_path / "run"), "-n", "1", "--", PYTHON,
                           "-c", "import torch"], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, cwd=tmp_path,
                          env={**os.environ, "MESHSCOPE_MAX_FILE_BYTES": "1" + "0" * 23})
    assert "Unable to cast" not in proc.stderr
    assert "MESHSCOPE_MAX_FILE_BYTES='100000000000000000000000' is out of range" in proc.stderr, \
        proc.stderr[-2000:]


def test_source_root_makes_paths_relative_in_every_report_format(tmp_path):
    script = tmp_path / "src" / "train.py"
    script.parent.mkdir()
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.distributed.tensor import Replicate, distribute_tensor\n"
        "dist.init_process_group('gloo')\n"
        "mesh = init_device_mesh('cpu', (1,))\n"
        "w = distribute_tensor(torch.ones(4), mesh, [Replicate()])\n"
        "x = torch.ones(4)\n"
        "y = w + x\n"
        "dist.destroy_process_group()\n")
    run_dir = tmp_path / "run"
    proc = run_record("-o", str(run_dir), "--policy", "auto", "-n", "1", "--", PYTHON,
                      str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = str(script.parent)
    for fmt in ("html", "md", "json", "csv"):
        plain = tmp_path / f"plain.{fmt}"
        relative = tmp_path / f"relative.{fmt}"
        for out, extra in ((plain, []), (relative, ["--source-root", root])):
            done = subprocess.run([cli(), "report", str(run_dir), "-o", str(out), *extra],
                                  capture_output=True, text=True, timeout=HANG_GUARD_S)
            assert done.returncode == 0, done.stderr
        assert f"{root}/train.py" in plain.read_text(), fmt
        text = relative.read_text()
        assert root + "/" not in text, fmt
        assert "train.py" in text, fmt
