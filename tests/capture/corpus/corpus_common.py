"""Plumbing of the public-report corpus (tests/capture/test_birth_corpus.py):
each script is a two-rank CPU (gloo) reduction of a public report of
"got mixed torch.Tensor and DTensor". A script marks the line where the
plain tensor is born with `# BIRTH` and the op that meets a DTensor with
`# INCIDENT`; the test records it with `meshscope record -n 2 --policy auto`
and checks the op, the origin class, the birth line and the user's name for
the tensor.

Each script also hands what it computed to `result()`. The fix test
(tests/capture/test_corpus_fixes.py) runs the script once more in a single
process as the reference (CORPUS_REFERENCE=1: one rank, where every
DTensor's local tensor is the whole tensor, so a call that mixes the two
computes what the script means on the local tensors), then applies
meshscope's printed fix and compares the two ranks' result with it."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def setup(dim_name: str = "tp"):
    """(rank, mesh) of a one-dimensional mesh over both ranks."""
    torch.manual_seed(0)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    if os.environ.get("CORPUS_REFERENCE"):
        reference_mode()
    return dist.get_rank(), init_device_mesh("cpu", (dist.get_world_size(),),
                                             mesh_dim_names=(dim_name,))


def reference_mode() -> None:
    """The single-process reference: on a mesh of one rank a DTensor's
    local tensor is the whole tensor, so a torch call that mixes DTensors
    with plain tensors runs on the local tensors (autograd flows through
    to_local()); in-place calls write the DTensors' own storage."""
    from torch.distributed.tensor import DTensor
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_flatten, tree_map

    assert dist.get_world_size() == 1, "the reference runs on one rank"

    class LocalWhereMixed(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            leaves, _ = tree_flatten((args, kwargs))
            tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
            if (any(isinstance(x, DTensor) for x in tensors)
                    and any(not isinstance(x, DTensor) for x in tensors)):
                args, kwargs = tree_map(
                    lambda x: x.to_local() if isinstance(x, DTensor) else x, (args, kwargs))
            return func(*args, **kwargs)

    LocalWhereMixed().__enter__()
    # on one rank full_tensor() may hand back the local tensor itself; on
    # more it is always a new tensor (what an EMA's shadow copy relies on)
    full_tensor = DTensor.full_tensor
    DTensor.full_tensor = lambda self, **kwargs: full_tensor(self, **kwargs).clone()
    # where no torch function is seen (autograd runs backward without the
    # mode), a plain tensor is a Replicate() one: exact on one rank
    DTensor._op_dispatcher._allow_implicit_replication = True


def _whole(value):
    """`value` with every DTensor gathered to a full tensor, recursively
    (every rank calls this: full_tensor() is a collective)."""
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        return value.full_tensor().detach().clone()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_whole(v) for v in value]
    return value


def result(value) -> None:
    """What the script computed, saved by rank 0 to $CORPUS_RESULT (when
    set) with every DTensor gathered whole."""
    whole = _whole(value)
    path = os.environ.get("CORPUS_RESULT")
    if path and (not dist.is_initialized() or dist.get_rank() == 0):
        torch.save(whole, path)


def finish() -> None:
    dist.barrier()
    dist.destroy_process_group()


def forward_once(make_module, rows: int, cols: int) -> None:
    """Builds make_module(mesh) and calls it once on a replicated DTensor
    batch of rows x cols: the scripts whose incident is inside forward.
    Its output is the script's result."""
    from torch.distributed.tensor import Replicate, distribute_tensor

    _, mesh = setup()
    result(make_module(mesh)(distribute_tensor(torch.randn(rows, cols), mesh, [Replicate()])))
    finish()


def keras_mesh():
    """Keras on torch: the distribution initialized (the reference mode in
    the reference run) and a one-dimensional 'model' mesh over all ranks."""
    import keras

    keras.distribution.initialize()
    if os.environ.get("CORPUS_REFERENCE"):
        reference_mode()
    devices = keras.distribution.list_devices()
    return keras.distribution.DeviceMesh((len(devices),), ["model"], devices)


def keras_model_parallel(layout_map) -> None:
    """ModelParallel over `layout_map`, every rank feeding the same batch."""
    import keras

    distribution = keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name=None)
    distribution.auto_shard_dataset = False  # every rank feeds the same numpy batch
    keras.distribution.set_distribution(distribution)
    keras.utils.set_random_seed(0)


def keras_fit(model, outputs: int) -> None:
    """One epoch of SGD on a fixed batch; the model's weights are the result."""
    import numpy as np

    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(8, 8)).astype("float32")
    y = np.random.default_rng(1).normal(size=(8, outputs)).astype("float32")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    result([w.value for w in model.weights])
