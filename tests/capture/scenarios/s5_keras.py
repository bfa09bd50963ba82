"""Keras 3 (keras-nightly) on the torch backend, ModelParallel over 2 ranks:
the Dense kernels are sharded over the 'model' axis as DTensors and
model.fit() feeds plain per-rank numpy batches. Whatever Keras does with the
mixed operands (its own DTensorPromotionMode replicates them; older versions
raise), meshscope records it."""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402

import keras  # noqa: E402
from common import finish, reference_mode  # noqa: E402

ROWS, DIM, HIDDEN, EPOCHS = 16, 8, 16, 2


class AddPosition(keras.layers.Layer):
    """Adds a position ramp made with torch inside call(): a plain tensor
    created in forward (origin B) that meets the sharded activations."""

    def call(self, h):
        import torch

        ramp = torch.linspace(0.0, 0.1, h.shape[-1])  # plain, created inside forward
        return h + ramp  # INCIDENT (Keras' promotion mode replicates it)


def model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((DIM,))
    h = keras.layers.Dense(HIDDEN, activation="relu", name="dense_1")(inputs)
    h = AddPosition()(h)
    outputs = keras.layers.Dense(1, name="dense_2")(h)
    m = keras.Model(inputs, outputs)
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return m


def main():
    rank = 0
    if not reference_mode():
        keras.distribution.initialize()
        import torch.distributed as dist

        rank = dist.get_rank()
        mesh = keras.distribution.DeviceMesh((dist.get_world_size(),), ["model"],
                                             keras.distribution.list_devices())
        layouts = keras.distribution.LayoutMap(mesh)
        layouts["dense.*kernel"] = (None, "model")
        layouts["dense.*bias"] = ("model",)
        distribution = keras.distribution.ModelParallel(layout_map=layouts)
        distribution.auto_shard_dataset = False  # each rank feeds the same numpy data
        keras.distribution.set_distribution(distribution)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(ROWS, DIM)).astype("float32")
    y = x.sum(axis=1, keepdims=True) * 0.1
    m = model()
    history = m.fit(x, y, batch_size=8, epochs=EPOCHS, shuffle=False, verbose=0)
    finish(rank, [float(v) for v in history.history["loss"]])


if __name__ == "__main__":
    main()
