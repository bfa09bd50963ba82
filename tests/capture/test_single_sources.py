"""The version, the policy names and the default run-directory names have one
source, in C++ (core/version.h from CMakeLists.txt's project VERSION,
core/policy, core/store/run_directory); the Python package reads them through
meshscope._capture. pyproject.toml repeats the version for pip: checked here."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import meshscope
from meshscope import _attach, _capture
from meshscope import pytest as meshscope_pytest

from conftest import cli

ROOT = Path(__file__).resolve().parents[2]
STAMP = r"\d{8}-\d{6}"


def cmake_version() -> str:
    match = re.search(r"project\(meshscope VERSION ([0-9][0-9.]*)",
                      (ROOT / "CMakeLists.txt").read_text())
    assert match, "CMakeLists.txt: no project(meshscope VERSION ...)"
    return match.group(1)


def test_version_is_the_cmake_project_version_read_through_the_extension():
    assert _capture.version() == cmake_version()
    assert meshscope.__version__ == _capture.version()


def test_pyproject_repeats_the_cmake_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == cmake_version(), (
        "pyproject.toml's [project] version must equal CMakeLists.txt's project VERSION")


def test_cli_reports_the_same_version():
    out = subprocess.run([cli(), "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"meshscope {_capture.version()}"


def test_policy_names_come_from_core_and_every_one_is_accepted(tmp_path):
    names = _capture.policy_names()
    assert names and names[0] == "observe" and len(set(names)) == len(names)
    help_text = subprocess.run([cli(), "record", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    assert " | ".join(names) in help_text
    for name in names:
        session = meshscope.attach(tmp_path / name, policy=name)
        try:
            assert session.policy == name
        finally:
            meshscope.detach()


def test_a_bad_policy_names_every_policy(tmp_path):
    with pytest.raises(ValueError) as error:
        meshscope.attach(tmp_path / "run", policy="no-such-policy")
    assert f"({', '.join(_capture.policy_names())})" in str(error.value)
    assert not meshscope.attached()


def test_default_run_names_keep_their_format():
    when = 1_700_000_000
    stamp = datetime.datetime.fromtimestamp(when).strftime("%Y%m%d-%H%M%S")  # local time
    assert _capture.default_run_name(when) == stamp
    assert _capture.default_run_name(when, prefix="pytest") == f"pytest-{stamp}"
    assert _capture.default_run_name(when, job="port29500") == f"{stamp[:8]}-port29500"
    assert _capture.default_run_dir("/work/dir", stamp) == f"/work/dir/meshscope-runs/{stamp}"
    assert _capture.default_run_job() == "port0"
    assert _capture.default_run_job("none", "29500") == "port29500"
    assert _capture.default_run_job("d7c1", "29500") == "d7c1"


def test_attach_names_its_default_run_in_cpp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = re.escape(str(tmp_path / "meshscope-runs")) + "/"
    assert re.fullmatch(runs + STAMP, _attach._default_run_dir(0, 1))
    # several ranks without a process group: the job names the run
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setenv("MASTER_PORT", "29511")
    # ... and its launcher (the parent of every rank), as the port repeats run after run
    job = rf"\d{{8}}-port29511-job{os.getppid()}"
    assert re.fullmatch(runs + job, _attach._default_run_dir(0, 2))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    assert re.fullmatch(runs + job, _attach._default_run_dir(1, 2))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "d7c1")
    assert re.fullmatch(runs + r"\d{8}-d7c1", _attach._default_run_dir(1, 2))


def test_pytest_plugin_names_its_runs_in_cpp(tmp_path, monkeypatch):
    class Config:
        def getoption(self, name: str) -> None:
            return None

    monkeypatch.chdir(tmp_path)
    base = meshscope_pytest._base(Config())
    assert re.fullmatch(re.escape(str(tmp_path / "meshscope-runs")) + f"/pytest-{STAMP}", base)


def test_record_names_its_default_run_in_cpp(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHSCOPE_RUN")}
    proc = subprocess.run([cli(), "record", "--", sys.executable, "-c", "pass"], cwd=tmp_path,
                          env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    made = list((tmp_path / "meshscope-runs").iterdir())
    assert len(made) == 1 and re.fullmatch(STAMP, made[0].name), made
    assert f"recording into {made[0]}" in proc.stderr


def test_origin_letters_and_phase_codes_come_from_the_extension():
    """The adapters tag tensors with the origin letters and enter the phases
    the extension exports (core/model/vocabulary.h, core/store/records.h),
    never with letters of their own."""
    letters = {n: getattr(_capture, n) for n in dir(_capture) if n.startswith("ORIGIN_")}
    assert sorted(letters.values()) == list("ABCDEFGH"), letters
    assert letters["ORIGIN_UNSHARDED_PARAM"] == "A" and letters["ORIGIN_USER_CODE"] == "H"
    phases = {n: getattr(_capture, n) for n in dir(_capture) if n.startswith("PHASE_")}
    assert phases == {"PHASE_OTHER": 0, "PHASE_FORWARD": 1, "PHASE_BACKWARD": 2,
                      "PHASE_OPTIMIZER": 3, "PHASE_DATA": 4}
    for name in ("_adapters.py", "_attach.py"):
        source = (ROOT / "capture" / "python" / "meshscope" / name).read_text()
        literal = re.findall(r'(?<![\w\\])"[A-H]"', source)
        assert not literal, f"{name}: origin letters written as literals {literal}"


def test_settings_have_one_table_and_no_package_file_names_a_variable_itself():
    """The MESHSCOPE_* variables and their defaults come from one C++ table
    (core/model/settings.h) through meshscope._capture.settings(); the
    package and the CLI's record command read them from there."""
    settings = _capture.settings()
    assert settings["watchdog_s"] == ("MESHSCOPE_WATCHDOG_S", "480")
    assert settings["device_timing"] == ("MESHSCOPE_DEVICE_TIMING", "every:10")
    assert settings["policy"][1] == "observe" and settings["level"][1] == "dtensor"
    assert len({env for env, _ in settings.values()}) == len(settings)
    assert all(env.startswith("MESHSCOPE_") for env, _ in settings.values())
    from meshscope import _attach as attach_module
    assert attach_module._WATCHDOG_DEFAULT_S == 480.0
    assert attach_module._device_timing_every("") == 10
    code = re.compile(r'environ(?:\.get)?[\[(]\s*"MESHSCOPE_')
    for path in sorted((ROOT / "capture" / "python" / "meshscope").glob("*.py")):
        assert not code.search(path.read_text()), f"{path.name} reads a MESHSCOPE_ variable by name"
    for path in (ROOT / "app" / "cli" / "record").glob("*.cpp"):
        text = path.read_text()
        assert not re.search(r'env\["MESHSCOPE_|getenv\("MESHSCOPE_|envname\("MESHSCOPE_', text), \
            f"{path.name} names a MESHSCOPE_ variable itself"


def test_the_agents_cpp_calls_python_only_through_what_the_package_provides():
    """C++ calls back into Python through functions the package hands over
    by name (meshscope._capture.provide; capture/agent/interop/python_callbacks.h),
    never by importing the package's private modules."""
    for path in sorted((ROOT / "capture" / "agent").rglob("*.cpp")):
        text = path.read_text()
        assert not re.search(r'ImportModule\("meshscope\.', text), \
            f"{path.name} imports a meshscope module itself"
    with pytest.raises(ValueError, match="no callback named 'nope'"):
        _capture.provide("nope", print)
