"""Keras 3 ModelParallel on the torch backend as the keras.io distribution
guide sets it up, on 2 ranks: the Dense kernels and biases sharded on the
'model' axis by a LayoutMap, model.fit() on numpy data every rank holds
whole. Keras' own KerasDTensorPromotionMode replicates the plain batches
where they meet the sharded kernels; meshscope records each promotion and
checks its content agrees across ranks. The framework matrix's healthy run:
no finding, and the losses of the same run without meshscope.

Modelled on https://keras.io/guides/distribution/ (ModelParallel with a
LayoutMap) and https://github.com/keras-team/keras/issues/23418 (the torch
backend's ModelParallel).
"""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
from common import finish  # noqa: E402
from keras_common import keras_fit, keras_model_parallel  # noqa: E402


def main():
    rank = keras_model_parallel()
    finish(rank, keras_fit(keras.layers.Identity()))


if __name__ == "__main__":
    main()
