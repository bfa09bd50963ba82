"""Incidents found while torch.compile traces a function.

Dynamo runs the traced code on fake tensors, so the agent asks here for the
user frames being traced (the real Python stack is Dynamo's own) and for the
real tensor a fake one stands for (its provenance and content)."""

from __future__ import annotations

from typing import Any

from meshscope import _capture


def user_stack() -> list[tuple[str, int, str]] | None:
    """The frames Dynamo is tracing, innermost last; None when not tracing."""
    from torch._guards import TracingContext

    if TracingContext.try_get() is None:
        return None
    return [(f.filename, f.lineno or 0, f.name) for f in TracingContext.extract_stack()]


def real_tensor(fake: Any) -> Any:
    """The real tensor that `fake` was made from, or None (a fake tensor
    created inside the traced code has none)."""
    mode = getattr(fake, "fake_mode", None)
    converter = getattr(mode, "fake_tensor_converter", None)
    meta = getattr(converter, "meta_converter", None)
    if meta is None:
        return None
    for real, tensor_id in list(meta.describer.lookup_tensor.items()):
        if meta.tensor_memo.get(tensor_id) is fake:
            return real
    return None


def held_as(fake: Any) -> str:
    """The name of the traced code's local that holds `fake` (innermost
    frame first), or "": the traced function's variables are Dynamo's
    symbolic locals, not a Python frame's."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:  # noqa: BLE001 - not tracing, or another Dynamo version
        return ""
    while tx is not None:
        for name, variable in tx.symbolic_locals.items():
            try:
                if variable.as_proxy().node.meta.get("example_value") is fake:
                    return name
            except Exception:  # noqa: BLE001 - not a tensor variable
                continue
        tx = getattr(tx, "parent", None)
    return ""


# The agent's C++ calls these while Dynamo traces (capture/agent/interop/tracing.cpp).
_capture.provide("traced_user_stack", user_stack)
_capture.provide("real_tensor", real_tensor)
_capture.provide("traced_local", held_as)
