"""Points NCCL at meshscope's profiler plugin (plugins/nccl_profiler), which
records every NCCL collective with its GPU times into the rank file.

NCCL reads NCCL_PROFILER_PLUGIN when it creates a communicator, which torch
does at a process group's first collective on a GPU: attach() before that
(`meshscope record` attaches at interpreter start). A value the user set is
left alone; MESHSCOPE_NCCL_PROFILER=0 turns the plugin off."""

from __future__ import annotations

import os

import torch

from meshscope import _capture

PLUGIN_FILE = "libnccl-profiler-meshscope.so"
_ENV = "NCCL_PROFILER_PLUGIN"
_set_here: str | None = None  # the value attach() put into the environment


def plugin_path() -> str | None:
    """The plugin beside the capture extension (a CUDA build puts it there)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PLUGIN_FILE)
    return path if os.path.isfile(path) else None


def point_nccl_at_plugin() -> str:
    """Sets NCCL_PROFILER_PLUGIN when it is unset; returns what NCCL will load
    (or why nothing), for the rank's metadata."""
    global _set_here
    if os.environ.get("MESHSCOPE_NCCL_PROFILER", "1") == "0":
        return "off (MESHSCOPE_NCCL_PROFILER=0)"
    current = os.environ.get(_ENV)
    if current:
        return current if current == _set_here else f"{current} (set by the user)"
    if torch.version.cuda is None:
        return "off (this torch has no CUDA)"
    path = plugin_path()
    if path is None:
        return "off (not built: meshscope was built without MESHSCOPE_BUILD_CUDA)"
    os.environ[_ENV] = _set_here = path
    return path


def restore() -> None:
    """Takes back what point_nccl_at_plugin() set (detach)."""
    global _set_here
    if _set_here is not None and os.environ.get(_ENV) == _set_here:
        del os.environ[_ENV]
    _set_here = None
