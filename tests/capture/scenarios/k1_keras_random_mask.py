"""Keras 3 (keras-nightly, torch backend) ModelParallel over 2 ranks with a
per-rank random mask drawn inside a layer's call(): `torch.rand` after each
rank seeded its own RNG (seed + rank, the data-parallel habit). Keras'
KerasDTensorPromotionMode replicates the plain mask where it meets the sharded
activations, trusting every rank to hold the same values; they do not. The
run raises nothing and each rank trains on its own mask. meshscope's
fingerprints find the promotion INVALID; the fix it prints must make the
values identical on every rank, never a from_local(..., [Replicate()]).

Modelled on public reports:
- https://github.com/keras-team/keras/pull/23402 (KerasDTensorPromotionMode:
  plain tensors that meet DTensors in a Keras model are promoted to
  Replicate, for the whole session)
- https://github.com/awslabs/slapo/issues/21 (dropout under tensor
  parallelism: activation masks need the same seed on every rank)
- https://github.com/keras-team/keras/issues/23418 (the torch backend's
  ModelParallel, DTensor layouts per variable)
- https://github.com/NVIDIA/Megatron-LM/pull/206 (RNG state out of sync
  between tensor-parallel ranks; masks differ)

SCENARIO_FIX: Python lines run right after the mask is made (the fix
meshscope printed), with `mask`, torch and dist in scope. Each rank writes a
checksum of every mask it used (`masks` in $SCENARIO_OUT/rankN.json).
"""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
from common import finish  # noqa: E402
from keras_common import keras_fit, keras_model_parallel  # noqa: E402

MASKS: list[float] = []  # each mask drawn, as a checksum


class DropPath(keras.layers.Layer):
    """Stochastic depth: drops whole samples (a mask of shape (batch, 1)),
    drawn with torch inside call(). A sample must be dropped or kept in all
    its features; with a mask per rank, each rank drops other samples from
    its shard of the features."""

    def call(self, h):
        import torch
        import torch.distributed as dist

        mask = (torch.rand(h.shape[0], 1) > 0.5).float() * 2.0  # per rank: no shared seed
        if not mask.is_meta:  # Keras also calls this symbolically, on meta tensors
            scope = {"torch": torch, "dist": dist, "mask": mask}
            exec(os.environ.get("SCENARIO_FIX", ""), scope)
            mask = scope["mask"]
            MASKS.append(float((mask * torch.arange(1.0, mask.numel() + 1).view_as(mask)).sum()))
        return h * mask  # INCIDENT: replicated by Keras' promotion mode


def main():
    rank = keras_model_parallel()
    # the bug: after building, each rank seeds its RNG on its own
    losses = keras_fit(DropPath(), before_fit=lambda: keras.utils.set_random_seed(100 + rank))
    finish(rank, losses, masks=MASKS)


if __name__ == "__main__":
    main()
