"""Keras 3 on the torch backend, ModelParallel over the 'model' axis: the
LayoutMap shards d1's kernel on its output dim but has no key for d1's bias,
so the 1-D bias stays a plain tensor; in fit() d1's sharded matmul output
meets it in the bias add. Keras' KerasDTensorPromotionMode replicates it and
training goes on, with the bias replicated beside a sharded output. The fix
is a LayoutMap key of the bias's rank: `('model',)`, not `(None, 'model')`
(an IndexError for a 1-D variable).

Modelled on the Keras distribution guide's ModelParallel example, which
gives each Dense layer's bias its own key beside the kernel
(`layout_map["d1/bias"] = ("model",)`): https://keras.io/guides/distribution/
and keras-team/keras#23402, "Introduce Model Parallel infrastructure and
DTensor support for Keras Variables in torch core.py" (a variable no key
matches stays a plain torch tensor): https://github.com/keras-team/keras/pull/23402"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "A",
          "name": "model.get_layer('d1').bias",
          "plan_hint": "Keras variable d1/bias matches no key of the ModelParallel LayoutMap",
          # one entry per dim of the 1-D bias
          "fix": "layout_map['d1/bias'] = ('model',)"}

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
from keras import layers  # noqa: E402
from corpus_common import keras_fit, keras_mesh, keras_model_parallel  # noqa: E402


def main():
    mesh = keras_mesh()
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    layout_map["d2/kernel"] = ("model", None)
    keras_model_parallel(layout_map)
    inputs = keras.Input(shape=(8,))
    h = layers.Dense(16, name="d1")(inputs)  # BIRTH
    out = layers.Dense(4, use_bias=False, name="d2")(h)
    keras_fit(keras.Model(inputs, out), 4)  # INCIDENT (in fit)


if __name__ == "__main__":
    main()
