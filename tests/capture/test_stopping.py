"""Stopping a job whose ranks are blocked inside C++ collectives
(`meshscope record`): Ctrl-C / SIGTERM reach each rank once, SIGKILL follows
after the grace period, the agent's SIGTERM handler never keeps a rank
alive, every rank's end is written to launch.json, and no rank outlives a
killed launcher. Each test ends by itself: the ranks' gloo timeout (300 s)
and the hang guard bound it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import meshscope
from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli

BLOCKED = re.compile(r"rank (\d) pid (\d+) blocked")


def start(run_dir, grace: int, script: str = "h1_blocked_recv"
          ) -> tuple[subprocess.Popen, dict[int, int]]:
    """Records `script` on 2 ranks; returns once both ranks block."""
    proc = subprocess.Popen(
        [cli(), "record", "-o", str(run_dir), "-n", "2", "--kill-grace", str(grace), "--",
         PYTHON, str(SCENARIOS / f"{script}.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pids: dict[int, int] = {}
    for line in proc.stdout:
        for m in BLOCKED.finditer(line):
            pids[int(m.group(1))] = int(m.group(2))
        if len(pids) == 2:
            break
    assert len(pids) == 2, proc.stderr.read()[-3000:]
    time.sleep(1.0)  # from print to inside recv
    return proc, pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of a dead launcher is reaped by init; treat it as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def ends(run_dir) -> dict:
    return json.loads((run_dir / "launch.json").read_text())


def test_sigint_stops_ranks_blocked_in_a_collective(tmp_path):
    run_dir = tmp_path / "run"
    proc, pids = start(run_dir, grace=2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert "got SIGINT; stopping the ranks (SIGKILL after 2 s)" in err
    launch = ends(run_dir)
    assert launch["stop_signal"] == "SIGINT"
    # Python cannot act on SIGINT inside recv: the grace ran out
    assert [r["ended"] for r in launch["ranks"]] == [
        "killed by SIGKILL from meshscope after the 2 s grace"] * 2, launch
    assert not any(alive(pid) for pid in pids.values())
    run = meshscope.load_run(run_dir)
    assert len(run["rank_details"]) == 2


def test_sigterm_is_not_held_up_by_the_agents_handler(tmp_path):
    """The agent flushes its rank file on SIGTERM from a Python handler,
    which cannot run while the rank is inside recv; its guard ends the rank
    with SIGTERM itself instead, long before the launcher's 120 s grace."""
    run_dir = tmp_path / "run"
    proc, pids = start(run_dir, grace=120)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    launch = ends(run_dir)
    assert [r["ended"] for r in launch["ranks"]] == ["killed by SIGTERM"] * 2, (launch, err[-2000:])
    assert proc.returncode == 128 + signal.SIGTERM
    assert not any(alive(pid) for pid in pids.values())


def test_no_rank_outlives_a_killed_launcher(tmp_path):
    proc, pids = start(tmp_path / "run", grace=120)
    proc.kill()
    proc.wait(timeout=HANG_GUARD_S)
    for _ in range(HANG_GUARD_S * 10):  # the kernel delivers the parent-death signal
        if not any(alive(pid) for pid in pids.values()):
            break
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids.values())


def test_ctrl_c_from_a_terminal_stops_the_job(tmp_path):
    """Ctrl-C typed in the terminal: the kernel signals the whole foreground
    group (launcher and ranks), the launcher does not send it again, and the
    ranks blocked in recv are killed after the grace."""
    import pty

    run_dir = tmp_path / "run"
    pid, master = pty.fork()
    if pid == 0:  # the child: a session whose controlling terminal is the pty
        os.execv(cli(), [cli(), "record", "-o", str(run_dir), "-n", "2", "--kill-grace", "2",
                         "--", PYTHON, str(SCENARIOS / "h1_blocked_recv.py")])
    output = b""
    while output.count(b"blocked") < 2:
        output += os.read(master, 4096)
    time.sleep(1.0)
    os.write(master, b"\x03")  # the terminal's interrupt character
    while True:  # read until the launcher closes the terminal
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGINT, text[-3000:]
    assert "got SIGINT; stopping the ranks" in text
    assert ends(run_dir)["stop_signal"] == "SIGINT"
    assert all(r["ended"].startswith("killed by") for r in ends(run_dir)["ranks"]), text[-2000:]


def test_check_names_the_collective_each_rank_waits_in(tmp_path):
    """A hang from ranks taking different paths into collectives: after the
    job is stopped, `check` names the first collective one rank issued where
    the other issued another, with both call sites."""
    run_dir = tmp_path / "run"
    proc, _ = start(run_dir, grace=2, script="h2_collective_mismatch")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=HANG_GUARD_S)
    check = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
    assert check.returncode == 1, check.stdout + check.stderr
    script = SCENARIOS / "h2_collective_mismatch.py"
    lines = script.read_text().splitlines()
    at = {rank: f"{script}:{next(i + 1 for i, line in enumerate(lines) if line.endswith(mark))}"
          for rank, mark in ((0, "# MISMATCH rank 0"), (1, "# MISMATCH rank 1"))}
    assert (f"divergent: rank 1: collective #1 (step 0) is broadcast on default_pg (2 ranks), "
            f"4 B at {at[1]} where rank(s) 0 have all_reduce on default_pg (2 ranks), 8 B at "
            f"{at[0]}") in check.stdout, check.stdout
    report = json.loads(subprocess.run(
        [cli(), "report", str(run_dir), "--format", "json", "-o", "-"], capture_output=True,
        text=True, timeout=HANG_GUARD_S, check=True).stdout)
    kinds = {d["kind"] for d in report["divergences"]}
    assert "collectives" in kinds, report["divergences"]
    # where each rank stopped: the agent wrote its pending collective a
    # second after SIGINT, before the launcher's SIGKILL
    assert (f"hang: {at[0]}: rank(s) 0 waited in all_reduce on default_pg (2 ranks), 8 B, its "
            f"collective #1, issued at {at[0]}; rank 1 waited in broadcast on default_pg (2 "
            f"ranks), 4 B, its collective #1, issued at {at[1]}; killed by SIGKILL from meshscope "
            f"after the 2 s grace; its last completed collective: all_reduce on default_pg (2 "
            f"ranks) at ") in check.stdout, check.stdout
    stops = {s["rank"]: s for s in report["stops"]}
    assert stops[0]["stopped_in"] == stops[1]["stopped_in"] == "collective-hang", stops


def start_watched(run_dir, watchdog: int) -> tuple[subprocess.Popen, dict[int, int], list[str]]:
    """Records h2_collective_mismatch with `--watchdog`; returns once both
    ranks' watchdogs reported (with the stderr lines read so far)."""
    proc = subprocess.Popen(
        [cli(), "record", "-o", str(run_dir), "-n", "2", "--kill-grace", "2", "--watchdog",
         str(watchdog), "--", PYTHON, str(SCENARIOS / "h2_collective_mismatch.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pids: dict[int, int] = {}
    for line in proc.stdout:
        pids.update((int(m.group(1)), int(m.group(2))) for m in BLOCKED.finditer(line))
        if len(pids) == 2:
            break
    seen, err = set(), []
    for line in proc.stderr:
        err.append(line)
        if line.startswith("meshscope watchdog: rank "):
            seen.add(int(line.split()[3].rstrip(":")))
        if len(seen) == 2:
            break
    assert seen == {0, 1}, "".join(err)[-3000:]
    return proc, pids, err


def test_watchdog_writes_the_stacks_and_leaves_the_training_alone(tmp_path):
    """A collective pending past the watchdog's time (--watchdog 2): each
    rank prints the Python stacks of its threads once, writes them into its
    rank file as a hang incident, and goes on waiting (the ranks stay alive
    until the job is stopped)."""
    run_dir = tmp_path / "run"
    proc, pids, err = start_watched(run_dir, 2)
    time.sleep(1.0)
    assert all(alive(pid) for pid in pids.values())  # the training is left alone
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()  # not communicate(): it would skip what the loop buffered
    proc.wait(timeout=HANG_GUARD_S)
    text = "".join(err) + rest
    assert text.count("meshscope watchdog: rank 0:") == 1, text[-3000:]  # printed once
    assert "dist.all_reduce(metric)  # MISMATCH rank 0" in text, text[-4000:]
    report = json.loads(subprocess.run(
        [cli(), "report", str(run_dir), "--format", "json", "-o", "-"], capture_output=True,
        text=True, timeout=HANG_GUARD_S, check=True).stdout)
    hangs = [g["example"] for g in report["groups"] if g["kind"] == "collective-hang"]
    assert {i["rank"] for i in hangs} == {0, 1}, hangs
    assert all("MainThread" in i["detail"] for i in hangs), hangs
    assert any("dist.broadcast(flag, src=1)  # MISMATCH rank 1" in i["detail"] for i in hangs)
