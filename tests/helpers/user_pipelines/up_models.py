"""Small Keras models for the user pipelines (`model.name: up_models:<function>`): cheap
enough that the input is the limit, except `big_mlp` (the compute-bound case)."""

from __future__ import annotations

import keras


def vector_model() -> keras.Model:
    """32 float features -> one output (records, arrays, generator, CSV)."""
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(1)], name="vector")


def image32_model() -> keras.Model:
    return keras.Sequential(
        [keras.Input((32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(1)], name="image32"
    )


def image48_model() -> keras.Model:
    return keras.Sequential(
        [keras.Input((48, 48, 3)), keras.layers.Flatten(), keras.layers.Dense(1)], name="image48"
    )


def text_model() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((32,), dtype="int64"),
            keras.layers.Embedding(1001, 8),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ],
        name="text",
    )


def big_mlp() -> keras.Model:
    """256 features through three 2048-wide layers: ~10-20 ms per step of 16 on 2 cores,
    so a cheap input stays far from the limit even when another process shares the cores."""
    inputs = keras.Input((256,))
    h = keras.layers.Dense(2048, activation="relu")(inputs)
    h = keras.layers.Dense(2048, activation="relu")(h)
    h = keras.layers.Dense(2048, activation="relu")(h)
    return keras.Model(inputs, keras.layers.Dense(1)(h), name="big_mlp")
