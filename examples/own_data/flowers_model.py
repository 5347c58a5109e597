"""The CSV example's model: a Keras 3 model of one's own, named in the run file as
`model.name: flowers_model:make_model` (this file sits beside the run file, so tfperf finds
it). tfperf calls make_model() with no arguments and feeds it a dict of the CSV's columns
by name, each a batch of shape (batch,), with the label column (data.label) taken out."""

from __future__ import annotations

import keras

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def make_model() -> keras.Model:
    inputs = {name: keras.Input(shape=(), name=name, dtype="float32") for name in FEATURES}
    x = keras.ops.stack([inputs[name] for name in FEATURES], axis=-1)  # (batch, 4)
    x = keras.layers.Dense(16, activation="relu")(x)
    outputs = keras.layers.Dense(3, activation="softmax")(x)  # one probability per species
    return keras.Model(inputs, outputs)
