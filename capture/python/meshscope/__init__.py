"""meshscope: record, explain and reconcile mixed torch.Tensor / DTensor incidents.

    import meshscope
    meshscope.attach(policy="auto")      # or: with meshscope.capture(): ...
    ...training...
    meshscope.detach()

`meshscope record -- torchrun ...` attaches to every worker without editing
the script. Runs are read with the `meshscope` CLI, the GUI, or load_run().
"""

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
from meshscope import _capture
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
