"""Keras plumbing of the Keras scenarios (s5_keras.py, k1_keras_random_mask.py):
ModelParallel over both ranks and a small fit. Kept out of common.py, whose
line numbers the golden reports quote."""

from __future__ import annotations

from typing import Any


def keras_model_parallel() -> int:
    """Keras' ModelParallel over every rank (a 'model' axis), the Dense
    kernels and biases sharded on it, each rank fed the same numpy data.
    Returns this rank."""
    import keras
    import torch.distributed as dist

    keras.distribution.initialize()
    mesh = keras.distribution.DeviceMesh((dist.get_world_size(),), ["model"],
                                         keras.distribution.list_devices())
    layouts = keras.distribution.LayoutMap(mesh)
    layouts["dense.*kernel"] = (None, "model")
    layouts["dense.*bias"] = ("model",)
    distribution = keras.distribution.ModelParallel(layout_map=layouts)
    distribution.auto_shard_dataset = False  # each rank feeds the same numpy data
    keras.distribution.set_distribution(distribution)
    return dist.get_rank()


def keras_fit(middle: Any, epochs: int = 2, rows: int = 16, dim: int = 8, hidden: int = 16,
              before_fit: Any = None) -> list[float]:
    """Fits Dense(hidden, relu) -> middle (a layer) -> Dense(1) (seed 0, SGD,
    mse) to the same numpy rows on every rank, 2 batches an epoch; returns the
    epochs' losses. `before_fit()` runs between building and fitting."""
    import numpy as np
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((dim,))
    h = keras.layers.Dense(hidden, activation="relu", name="dense_1")(inputs)
    outputs = keras.layers.Dense(1, name="dense_2")(middle(h))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x = np.random.default_rng(3).normal(size=(rows, dim)).astype("float32")
    y = x.sum(axis=1, keepdims=True) * 0.1
    if before_fit:
        before_fit()
    history = model.fit(x, y, batch_size=rows // 2, epochs=epochs, shuffle=False, verbose=0)
    return [float(v) for v in history.history["loss"]]
