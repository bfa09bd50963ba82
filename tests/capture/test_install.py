"""`pip install --no-build-isolation <repo>` (or a wheel built once with `pip
wheel`) into a user's environment builds the agent against the torch there,
and the installed CLI records with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import HANG_GUARD_S, SCENARIOS

# a hang guard for building the whole project (-O3, two cores shared with
# the other tests ctest runs beside it), not a performance limit
BUILD_GUARD_S = 3 * HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_builds_a_wheel_to_reuse_with_the_agent_cli_and_gui(tmp_path):
    """What the README's install section says: build a wheel once with
    `pip wheel --no-build-isolation .` (that is what `pip install .` builds
    and installs), install it into an environment that has torch, and
    `import meshscope`, `meshscope` and `meshscope-gui` (Qt present) work."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
         "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=BUILD_GUARD_S)
    assert build.returncode == 0, build.stderr[-4000:]
    (wheel,) = wheels.glob("meshscope-*.whl")
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(wheel)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert install.returncode == 0, install.stderr[-4000:]
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

    gui = target / "bin" / "meshscope-gui"
    if os.environ.get("MESHSCOPE_GUI_BUILT"):
        png = tmp_path / "gui.png"
        shot = subprocess.run([str(ROOT / "tests" / "ui" / "xvfb.sh"), str(gui), "--screenshot",
                               str(png), str(run)], capture_output=True, text=True,
                              timeout=HANG_GUARD_S)
        assert shot.returncode == 0, shot.stdout + shot.stderr
        assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 20000
    else:
        assert not gui.exists()

    # installed beside another torch, the extension cannot load: the error says why
    other = tmp_path / "other"
    shutil.copytree(target / "meshscope", other / "meshscope")
    for ext in (other / "meshscope").glob("_capture*.so"):
        ext.write_bytes(b"not the torch it was built for")
    (other / "meshscope" / "_build_info.py").write_text('TORCH_VERSION = "2.10.0"\n')
    mismatch = subprocess.run([sys.executable, "-c", "import meshscope"],
                              env={**env, "PYTHONPATH": str(other)}, capture_output=True,
                              text=True, timeout=HANG_GUARD_S)
    assert mismatch.returncode != 0
    assert "meshscope was built against torch 2.10.0, and this environment has torch" in \
        mismatch.stderr, mismatch.stderr[-2000:]


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
