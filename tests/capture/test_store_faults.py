"""The fault-injection suite of the run store (issue #45): what `meshscope
record` keeps and says when the disk fails under it, and that the training
itself never changes because of it.

Disk faults come from the SQLite VFS shim (core/store/fault_vfs.h,
MESHSCOPE_FAULT_DISK), which fails the rank file's writes after a number of
bytes, or once a trigger file exists, the way a full disk (SQLITE_FULL) or a
file system remounted read-only (an I/O error) fails them. The mid-run
faults use the trigger, created after step 0 once every rank flushed
(SCENARIO_FAULT_DISK_AT_STEP): what a byte count keeps depends on how the
writer batched the records, which a loaded machine changes; where this process may mount a tmpfs,
a real full disk is tried too. Each case checks three things: the losses
are bit-identical to a run without the fault, every committed record is
readable, and what was lost is counted by reason and said by `record`.
docs/testing.md lists the faults and their outcomes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import meshscope
from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli

SCENARIO = "s1_input_batch"  # a mixed-tensor op on every step, reconciled by `auto`


def record(tmp_path: Path, name: str, *, fault: str | None = None, rank_fault: int | None = None,
           level: str = "dtensor", extra_env: dict[str, str] | None = None,
           run_dir: Path | None = None) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """Records the scenario on 2 ranks under `auto`; `fault` for every rank,
    or for `rank_fault` alone (set by a shell wrapper before the rank's
    interpreter starts, as the agent attaches there)."""
    run_dir = run_dir or tmp_path / f"run-{name}"
    out = tmp_path / f"out-{name}"
    out.mkdir()
    env = {**os.environ, "SCENARIO_OUT": str(out), **(extra_env or {})}
    command = [PYTHON, str(SCENARIOS / f"{SCENARIO}.py")]
    if fault and rank_fault is None:
        env["MESHSCOPE_FAULT_DISK"] = fault
    elif fault:
        command = ["sh", "-c", f'[ "$RANK" = {rank_fault} ] && export MESHSCOPE_FAULT_DISK={fault}; '
                   'exec "$@"', "sh", *command]
    proc = subprocess.run([cli(), "record", "-o", str(run_dir), "--policy", "auto", "--level",
                           level, "-n", "2", "--", *command],
                          env=env, capture_output=True, text=True, timeout=HANG_GUARD_S,
                          cwd=SCENARIOS)
    return proc, run_dir, out


def record_failing_after_step_0(tmp_path: Path, name: str, kind: str):
    """`kind` ("full" or "readonly") from the end of step 0 on, on every rank."""
    trigger = tmp_path / f"fail-disk-{name}"
    return record(tmp_path, name, fault=f"{kind}-when={trigger}", level="all",
                  extra_env={"SCENARIO_FAULT_DISK_AT_STEP": "0",
                             "SCENARIO_FAULT_DISK_FILE": str(trigger)})


def losses(out: Path) -> list[list[float]]:
    return [json.loads((out / f"rank{r}.json").read_text())["losses"] for r in (0, 1)]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> list[list[float]]:
    tmp = tmp_path_factory.mktemp("baseline")
    proc, run_dir, out = record(tmp, "clean", level="all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "lost" not in proc.stderr and "recorded nothing" not in proc.stderr
    return losses(out)


def lost_lines(stderr: str) -> dict[int, tuple[int, int, dict[str, int], int]]:
    """rank -> (lost, submitted, by reason, written) from record's lines."""
    found = {}
    for m in re.finditer(r"rank (\d+) lost (\d+) of (\d+) record\(s\) to its disk \(([^)]*)\); "
                         r"(\d+) were written", stderr):
        reasons = {k: int(n) for n, k in (part.split(" ") for part in m.group(4).split(", "))}
        found[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), reasons, int(m.group(5)))
    return found


def summary(run_dir: Path) -> dict:
    proc = subprocess.run([cli(), "summary", str(run_dir), "--json"], capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_disk_full_mid_run_keeps_committed_records_counts_the_rest_and_exits_3(
        tmp_path, baseline):
    # full after step 0: that step is on disk, the three after it are lost
    proc, run_dir, out = record_failing_after_step_0(tmp_path, "full", "full")
    assert losses(out) == baseline  # the training did not notice
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "the recording is incomplete" in proc.stderr
    lost = lost_lines(proc.stderr)
    assert set(lost) == {0, 1}, proc.stderr[-3000:]
    run = meshscope.load_run(run_dir)
    for rank, (n, submitted, reasons, written) in lost.items():
        assert set(reasons) == {"disk_full"} and n == reasons["disk_full"] > 0
        assert n + written == submitted  # every record is either on disk or counted
        ranks = {r["rank"]: r for r in run["ranks"]}
        assert 0 < ranks[rank]["ops"] <= written
    # readers see the exact counts (launch.json carries what the ranks told
    # `record`), and ranks that closed are not called "open or killed"
    shown = {r["rank"]: r for r in summary(run_dir)["ranks"]}
    for rank, (n, _, _, _) in lost.items():
        assert shown[rank]["drops"]["disk_full"] == n
        assert shown[rank]["status"].startswith("closed"), shown[rank]
    # the header of a file whose checkpoint the full disk stopped is not
    # read as "truncated": the committed pages are in the -wal
    check = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True)
    assert check.returncode in (0, 1), check.stderr
    assert "truncated" not in check.stderr


def test_space_freed_mid_run_counts_exactly_what_was_lost(tmp_path, baseline):
    proc, run_dir, out = record(tmp_path, "freed", fault="full-after=300000,free-after=3",
                                level="all")
    assert losses(out) == baseline
    assert proc.returncode == 3, proc.stderr[-3000:]
    lost = lost_lines(proc.stderr)
    assert lost, proc.stderr[-3000:]
    run = meshscope.load_run(run_dir)
    for rank, (n, submitted, reasons, written) in lost.items():
        assert n + written == submitted
        # space came back: the file holds the final counts, equal to record's
        stored = next(r for r in run["ranks"] if r["rank"] == rank)["drops"]
        assert stored.get("disk_full") == n, (stored, n)


def test_a_rank_that_cannot_create_its_file_still_runs_its_policy(tmp_path, baseline):
    proc, run_dir, out = record(tmp_path, "nofile", fault="full-after=0", rank_fault=1,
                                level="all")
    # the policy reconciled rank 1's mixed tensors as on rank 0: no
    # "got mixed torch.Tensor and DTensor", no abort
    assert "got mixed" not in proc.stderr, proc.stderr[-3000:]
    assert losses(out) == baseline
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert re.search(r"rank 1 recorded nothing: .*rank-00001\.msdb: cannot create rank file",
                     proc.stderr), proc.stderr[-3000:]
    assert "rank 1 is not recording" in proc.stderr
    # no empty file left for a reader to call damaged
    assert [p.name for p in sorted(run_dir.glob("rank-*.msdb"))] == ["rank-00000.msdb"]


def test_read_only_mid_run_counts_io_errors_and_launch_file_is_explained(tmp_path, baseline):
    proc, run_dir, out = record_failing_after_step_0(tmp_path, "ro", "readonly")
    assert losses(out) == baseline
    assert proc.returncode == 3, proc.stderr[-3000:]
    lost = lost_lines(proc.stderr)
    assert set(lost) == {0, 1}, proc.stderr[-3000:]
    for n, submitted, reasons, written in lost.values():
        assert set(reasons) == {"io_error"} and n + written == submitted
    shown = {r["rank"]: r for r in summary(run_dir)["ranks"]}
    for rank in (0, 1):
        assert shown[rank]["ops"] > 0
        assert shown[rank]["drops"]["io_error"] == lost[rank][0]
        # the read-only disk took no end marker; the rank closed and said so
        assert shown[rank]["status"] == "closed (its end marker was lost to the disk)"


def test_the_run_folder_deleted_mid_run_is_named_as_such(tmp_path, baseline):
    run_dir = tmp_path / "run-deleted"
    # rank 0 removes the folder after its first step; the job goes on
    proc, _, out = record(tmp_path, "deleted", run_dir=run_dir,
                          extra_env={"SCENARIO_DELETE_RUN_AT_STEP": "1"})
    assert losses(out) == baseline
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"the run directory {run_dir} was deleted while the job ran" in proc.stderr
    assert "no process of the job attached" not in proc.stderr


def test_a_copy_without_its_shm_is_read_with_its_wal_and_left_untouched(tmp_path):
    # a rank killed mid-run leaves its -wal and -shm; the copy drops the -shm
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, torch, meshscope\n"
        "meshscope.attach(os.environ['RUN'], level='all')\n"
        "x = torch.ones(4)\n"
        "for _ in range(500):\n"
        "    x = x + 1\n"
        "meshscope._capture.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    run_dir = tmp_path / "run"
    proc = subprocess.run([PYTHON, str(script)], env={**os.environ, "RUN": str(run_dir),
                                                       "MESHSCOPE_LEVEL": "all"},
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert (run_dir / "rank-00000.msdb-wal").stat().st_size > 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("manifest.json", "rank-00000.msdb", "rank-00000.msdb-wal"):
        shutil.copy(run_dir / name, copy / name)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    original, copied = summary(run_dir), summary(copy)
    assert copied["ranks"][0]["ops"] == original["ranks"][0]["ops"] >= 500
    # nothing was written beside the copy: no -shm made, no checkpoint
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="reading as another user needs root and setpriv")
def test_another_user_reads_a_run_in_a_folder_it_cannot_write(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, torch, meshscope\n"
        "meshscope.attach(os.environ['RUN'], level='all')\n"
        "x = torch.ones(4)\n"
        "for _ in range(300):\n"
        "    x = x + 1\n"
        "meshscope._capture.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    shared = Path("/tmp") / f"meshscope-other-user-{os.getpid()}"
    shutil.rmtree(shared, ignore_errors=True)
    try:
        run_dir = shared / "run"
        proc = subprocess.run([PYTHON, str(script)],
                              env={**os.environ, "RUN": str(run_dir), "MESHSCOPE_LEVEL": "all"},
                              capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert proc.returncode == -9, proc.stderr[-2000:]
        os.chmod(shared, 0o755)
        os.chmod(run_dir, 0o755)
        for p in run_dir.iterdir():
            os.chmod(p, 0o644)
        before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
        other = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                cli(), "summary", str(run_dir), "--json"],
                               capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert other.returncode == 0, other.stderr
        assert "readonly database" not in other.stderr
        assert json.loads(other.stdout)["ranks"][0]["ops"] >= 300
        assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_run_folders_and_files_are_the_owners_and_groups(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([cli(), "record", "-o", str(run_dir), "-n", "1", "--", PYTHON, "-c",
                           "import torch; torch.ones(2) + 1"],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert run_dir.stat().st_mode & 0o777 == 0o750
    for p in run_dir.iterdir():
        assert p.stat().st_mode & 0o777 == 0o640, p
    # the umask is respected: 077 leaves the owner alone
    run2 = tmp_path / "run2"
    proc = subprocess.run(["sh", "-c", 'umask 077; exec "$@"', "sh", cli(), "record", "-o",
                           str(run2), "-n", "1", "--", PYTHON, "-c", "import torch"],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert run2.stat().st_mode & 0o777 == 0o700
    assert (run2 / "rank-00000.msdb").stat().st_mode & 0o777 == 0o600


def test_a_symlink_planted_as_launch_json_is_replaced_not_followed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run_dir / "launch.json").symlink_to(victim)
    proc = subprocess.run([cli(), "record", "-o", str(run_dir), "-n", "1", "--", PYTHON, "-c",
                           "import torch"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert victim.read_text() == "keep me\n"
    assert not (run_dir / "launch.json").is_symlink()
    assert json.loads((run_dir / "launch.json").read_text())["ranks"][0]["ended"] == "exited with 0"


def test_a_subprocess_a_rank_starts_from_a_thread_that_ends_is_not_killed(tmp_path):
    # PR_SET_PDEATHSIG follows the thread that started a process: only the
    # job's own processes may carry it, never what a rank starts
    done = tmp_path / "child-finished"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(1.5)\nopen({str(done)!r}, 'w').close()\n")
    script = tmp_path / "threads.py"
    script.write_text(
        "import subprocess, sys, threading, time, torch\n"
        "procs = []\n"
        "def start():\n"
        f"    procs.append(subprocess.Popen([sys.executable, {str(child)!r}]))\n"
        "t = threading.Thread(target=start)\n"
        "t.start(); t.join()  # the thread that started the child has ended\n"
        "procs[0].wait()\n"
        "print('child exit', procs[0].returncode)\n")
    proc = subprocess.run([cli(), "record", "-o", str(tmp_path / "run"), "-n", "1", "--", PYTHON,
                           str(script)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "child exit 0" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert done.exists()


def test_two_jobs_into_one_folder_never_mix(tmp_path):
    run_dir = tmp_path / "run"
    slow = [PYTHON, "-c", "import time, torch; torch.ones(2) + 1; time.sleep(3)"]
    first = subprocess.Popen([cli(), "record", "-o", str(run_dir), "-n", "1", "--", *slow],
                             stderr=subprocess.PIPE, text=True)
    for _ in range(200):  # until the first job's rank registered
        if (run_dir / "manifest.json").exists():
            break
        import time
        time.sleep(0.05)
    second = subprocess.run([cli(), "record", "-o", str(run_dir), "-n", "1", "--", *slow],
                            capture_output=True, text=True, timeout=HANG_GUARD_S)
    _, first_err = first.communicate(timeout=HANG_GUARD_S)
    assert first.returncode == 0, first_err[-2000:]
    assert second.returncode == 2, second.stderr
    assert str(run_dir) in second.stderr
    assert len(list(run_dir.glob("rank-*.msdb"))) == 1


def test_two_default_runs_started_in_the_same_second_get_their_own_folders(tmp_path):
    job = [PYTHON, "-c", "import torch; torch.ones(2) + 1"]
    procs = [subprocess.Popen([cli(), "record", "-n", "1", "--", *job], cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=HANG_GUARD_S)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    recorded = sorted(re.search(r"run recorded in (\S+)", e).group(1) for e in errs)
    assert recorded[0] != recorded[1]
    for folder in recorded:
        run = meshscope.load_run(folder)
        assert [r["rank"] for r in run["rank_details"]] == [0]


def test_two_attached_jobs_into_one_folder_pick_fresh_folders(tmp_path):
    # scripts that attach() themselves, as two jobs on other ports would
    run_dir = tmp_path / "shared"
    script = tmp_path / "job.py"
    script.write_text("import os, sys, torch, meshscope\n"
                      "s = meshscope.attach(os.environ['RUN'])\n"
                      "torch.ones(2) + 1\n"
                      "print('DIR', s.run_dir)\n")
    dirs = []
    # rank 1 of the second job: its rank file is not in the folder yet, so
    # only the claim tells the two jobs apart
    for port, rank in (("29611", "0"), ("29612", "1")):
        proc = subprocess.run([PYTHON, str(script)],
                              env={**os.environ, "RUN": str(run_dir), "MASTER_PORT": port,
                                   "WORLD_SIZE": "2", "RANK": rank, "MESHSCOPE_RUN_ID": ""},
                              capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert proc.returncode == 0, proc.stderr[-2000:]
        dirs.append(re.search(r"DIR (\S+)", proc.stdout).group(1))
        if port == "29612":
            assert "is the run folder of another job" in proc.stderr, proc.stderr[-2000:]
    assert dirs[0] == str(run_dir) and dirs[1] != dirs[0]


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def test_a_real_full_disk_where_the_test_may_mount_one(tmp_path, baseline):
    # the case: a 1.2 MB tmpfs; `record` used to exit 0 with a
    # 0-byte launch.json and every rank read as "truncated". A whole run now
    # fits in 1.2 MB (460 KB, op chunks), so the disk is filled after step 1
    # (both ranks recording), as another program writing there would.
    disk = tmp_path / "small"
    if not _mount_tmpfs(disk, "1200k"):
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        proc, run_dir, out = record(tmp_path, "tmpfs", level="all", run_dir=disk / "run",
                                    extra_env={"SCENARIO_FILL_DISK_AT_STEP": "1"})
        assert losses(out) == baseline
        assert proc.returncode == 3, proc.stderr[-3000:]
        lost = lost_lines(proc.stderr)
        assert lost, proc.stderr[-3000:]
        for n, submitted, reasons, written in lost.values():
            assert n + written == submitted and "disk_full" in reasons
        # readable where it lies, and after copying to a normal disk
        copy = tmp_path / "copied"
        shutil.copytree(run_dir, copy)
        for folder in (run_dir, copy):
            check = subprocess.run([cli(), "summary", str(folder)], capture_output=True,
                                   text=True, timeout=HANG_GUARD_S)
            assert check.returncode == 0, check.stderr
            assert "truncated" not in check.stderr
        # and from a read-only mount, without writing (it used to fail with
        # "attempt to write a readonly database")
        remount = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True,
                                 timeout=60)
        if remount.returncode == 0:
            check = subprocess.run([cli(), "summary", str(run_dir)], capture_output=True,
                                   text=True, timeout=HANG_GUARD_S)
            assert check.returncode == 0, check.stderr
            assert "readonly" not in check.stderr
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, timeout=60)


def test_merging_a_run_still_being_written_warns(tmp_path):
    script = tmp_path / "live.py"
    script.write_text("import os, sys, time, torch, meshscope\n"
                      "meshscope.attach(os.environ['RUN'], level='all')\n"
                      "torch.ones(2) + 1\n"
                      "meshscope._capture.flush()\n"
                      "print('ready', flush=True)\n"
                      "time.sleep(120)\n")
    run_dir = tmp_path / "run"
    live = subprocess.Popen([PYTHON, str(script)], env={**os.environ, "RUN": str(run_dir)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline().strip() == "ready", live.stderr.read()
        merged = subprocess.run([cli(), "merge", str(run_dir), "-o", str(tmp_path / "merged")],
                                capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert merged.returncode == 0, merged.stderr
        assert re.search(rf"warning: rank 0 of {re.escape(str(run_dir))} \(pid {live.pid} on "
                         r"this host\) is still being written", merged.stderr), merged.stderr
    finally:
        live.kill()
        live.wait()
