"""The capture extension linked by a toolchain that adds -static-libstdc++
(the GPU machine's default gcc 13 wrapper, conda's and manylinux-style
compilers): on an H100 its attach() crashed with SIGSEGV in std::ostream
(meshscope::newRunId), because the extension carried a second libstdc++
beside torch's. The build now links libstdc++.so.6 ahead of everything, so
such a build shares torch's runtime. Checked on the ELF file (no C++ runtime
of its own, libstdc++.so.6 needed) and by using it: attach() without a run
id, an incident, detach()."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

EXT = Path(os.environ["STATIC_LIBSTDCXX_EXT"])


def test_the_extension_needs_libstdcxx_and_defines_none_of_it():
    needed = subprocess.run(["readelf", "-d", str(EXT)], capture_output=True, text=True,
                            check=True).stdout
    assert "[libstdc++.so.6]" in needed, needed
    defined = subprocess.run(["nm", "-D", "--defined-only", str(EXT)], capture_output=True,
                             text=True, check=True).stdout.split("\n")
    runtime = [line for line in defined
               if any(s in line for s in ("_ZNSt6locale", "_ZNSo9_M_insert", "__cxa_throw"))]
    assert runtime == [], runtime[:5]


def test_attach_without_a_run_id_works_from_that_build(tmp_path):
    package = tmp_path / "site" / "meshscope"
    shutil.copytree(os.environ["MESHSCOPE_PACKAGE_DIR"], package,
                    ignore=shutil.ignore_patterns("_capture*.so", "__pycache__"))
    shutil.copy(EXT, package / EXT.name)
    code = textwrap.dedent("""
        import sys, torch, meshscope
        from meshscope import _capture
        assert _capture.__file__.startswith(sys.argv[2]), _capture.__file__
        session = meshscope.attach(sys.argv[1])  # no run id: newRunId() in C++
        meshscope.detach()
        run = meshscope.load_run(sys.argv[1])
        print(run["run_id"] if "run_id" in run else "loaded")
        """)
    child = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run"), str(package)],
                           env={**os.environ, "PYTHONPATH": str(package.parent)},
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
