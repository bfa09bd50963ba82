"""meshscope: record, explain and reconcile mixed torch.Tensor / DTensor incidents.

    import meshscope
    meshscope.attach(policy="auto")      # or: with meshscope.capture(): ...
    ...training...
    meshscope.detach()

`meshscope record -- torchrun ...` attaches to every worker without editing
the script. Runs are read with the `meshscope` CLI, the GUI, or load_run().
"""

import torch as _torch

from meshscope import _build_info

try:
    from meshscope import _capture
except ImportError as _error:  # the extension is tied to the torch it was built against
    if _torch.__version__ != _build_info.TORCH_VERSION:
        raise ImportError(
            f"meshscope was built against torch {_build_info.TORCH_VERSION}, and this environment "
            f"has torch {_torch.__version__}: build meshscope again here (pip install "
            f"--no-build-isolation --force-reinstall PATH_TO_MESHSCOPE, or a wheel built with "
            f"this torch)") from _error
    raise

from meshscope._attach import (
    MixedTensorError,
    Session,
    attach,
    attached,
    capture,
    detach,
    fingerprint,
    mark_step,
    stats,
)
from meshscope._runs import load_run

__version__: str = _capture.version()  # core/version.h, from CMakeLists.txt's project VERSION

__all__ = [
    "MixedTensorError",
    "Session",
    "attach",
    "attached",
    "capture",
    "detach",
    "fingerprint",
    "load_run",
    "mark_step",
    "stats",
]
