"""Keras 3 on the torch backend, ModelParallel over the 'model' axis: the
LayoutMap names the kernels of d1 and d2, so d3's kernel matches no key and
Keras creates it as a plain tensor. In fit(), d2's sharded output meets it
in d3's matmul; Keras' own KerasDTensorPromotionMode replicates it, so the
model trains, but d3 runs replicated on every rank instead of sharded.

Modelled on keras-team/keras#23402, "Introduce Model Parallel
infrastructure and DTensor support for Keras Variables in torch core.py"
(a variable whose LayoutMap lookup finds no layout stays a plain torch
tensor; DTensors only for the variables the map names):
https://github.com/keras-team/keras/pull/23402"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::matmul", "aten::mm"], "origin": "A",
          "name": "model.get_layer('d3').kernel",
          "plan_hint": "Keras variable d3/kernel matches no key of the ModelParallel LayoutMap "
                       "['d1/kernel', 'd2/kernel']: add one, layout_map['d3/kernel']",
          "fix": "layout_map['d3/kernel'] = (None, 'model')"}

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
    h = layers.Dense(16, use_bias=False, name="d1")(inputs)
    h = layers.Dense(16, use_bias=False, name="d2")(h)
    out = layers.Dense(4, use_bias=False, name="d3")(h)  # BIRTH
    keras_fit(keras.Model(inputs, out), 4)  # INCIDENT (in fit)


if __name__ == "__main__":
    main()
