"""`pip install --no-build-isolation <repo>` into a user's environment builds
the agent against the torch there, and the installed CLI records with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import HANG_GUARD_S, SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_builds_the_agent_and_the_cli(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
         "--target", str(target), str(ROOT)],
        capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert build.returncode == 0, build.stderr[-4000:]
    cli = target / "bin" / "meshscope"
    assert cli.exists() and (target / "meshscope" / "_loader" / "sitecustomize.py").exists()
    if os.environ.get("MESHSCOPE_NCCL_PLUGIN_BUILT"):  # a CUDA build installs the NCCL plugin
        assert (target / "meshscope" / "libnccl-profiler-meshscope.so").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MESHSCOPE_CLI")}
    env.update(PYTHONPATH=f"{target}:{SCENARIOS}", MESHSCOPE_PYTHONPATH=str(target),
               SCENARIO_OUT=str(tmp_path))
    run = tmp_path / "run"
    rec = subprocess.run([str(cli), "record", "-o", str(run), "--policy", "auto", "-n", "2", "--",
                          sys.executable, str(SCENARIOS / "s1_input_batch.py")],
                         env=env, capture_output=True, text=True, timeout=HANG_GUARD_S,
                         cwd=tmp_path)
    assert rec.returncode == 0, rec.stderr[-4000:]
    check = subprocess.run([sys.executable, "-c", "import meshscope, sys; "
                            "r = meshscope.load_run(sys.argv[1]); print(meshscope.__file__, "
                            "sum(len(x['incidents']) for x in r['rank_details']))", str(run)],
                           env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    path, incidents = check.stdout.split()
    assert path.startswith(str(target)) and int(incidents) > 0


def test_the_project_venv_imports_the_build_and_runs_its_cli(tmp_path):
    """scripts/build.sh (which the README's commands run) puts the build into
    the project's virtualenv: `import meshscope` without PYTHONPATH, and
    `meshscope` on the venv's PATH."""
    venv_bin = ROOT / ".venv" / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MESHSCOPE_CLI")}
    found = subprocess.run([str(venv_bin / "python"), "-c",
                            "import meshscope; print(meshscope.__file__)"],
                           env=env, capture_output=True, text=True, cwd=tmp_path)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.startswith(str(ROOT / "build")), found.stdout
    version = subprocess.run([str(venv_bin / "meshscope"), "--version"], env=env,
                             capture_output=True, text=True, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("meshscope"), version.stderr
