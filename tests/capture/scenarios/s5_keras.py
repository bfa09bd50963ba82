"""Keras 3 (keras-nightly) on the torch backend, ModelParallel over 2 ranks:
the Dense kernels are sharded over the 'model' axis as DTensors and
model.fit() feeds plain per-rank numpy batches. Whatever Keras does with the
mixed operands (its own DTensorPromotionMode replicates them; older versions
raise), meshscope records it."""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
from common import finish, reference_mode  # noqa: E402
from keras_common import keras_fit, keras_model_parallel  # noqa: E402


class AddPosition(keras.layers.Layer):
    """Adds a position ramp made with torch inside call(): a plain tensor
    created in forward (origin B) that meets the sharded activations."""

    def call(self, h):
        import torch

        ramp = torch.linspace(0.0, 0.1, h.shape[-1])  # plain, created inside forward
        return h + ramp  # INCIDENT (Keras' promotion mode replicates it)


def main():
    rank = 0 if reference_mode() else keras_model_parallel()
    finish(rank, keras_fit(AddPosition()))


if __name__ == "__main__":
    main()
