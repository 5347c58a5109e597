"""Titanic CSV through tf.data.experimental.make_csv_dataset into a StringLookup model.

Source: tensorflow/docs site/en/tutorials/load_data/csv.ipynb ("Load CSV data", section
"Using tf.data": make_csv_dataset(titanic_file_path, batch_size, label_name='survived',
num_epochs=1, ignore_errors=True); the tutorial's titanic_model: Input(shape=(1,)) per
column, Normalization of the numeric ones, StringLookup + CategoryEncoding of the string
ones, Dense(64) + Dense(1) from logits).

Flaw: make_csv_dataset (a per-row CSV reader, the column types inferred from the file, a
shuffle of rows, a dict built per batch); no prefetch of its own.
Twin: TextLineDataset, shuffle the lines, batch, one decode_csv per batch into the same
dict (the same column types), parallel map, prefetch.
Ported with one added line: `.map(lambda f, y: (dict(f), y))`, without which Keras 3's
model.fit fails on this dataset and model (the OrderedDict's columns meet the model's
inputs in another order: "Cast string to float is not supported").
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from ._shared import count

SOURCE = "tensorflow/docs site/en/tutorials/load_data/csv.ipynb (Load CSV data)"
FORMAT = "CSV (numbers and strings)"
FLAW = "make_csv_dataset: per-row CSV parsing with inferred types"
TWIN = "TextLineDataset, shuffle, batch, decode_csv per batch into the dict, prefetch"
BATCH_SIZE = 32
COLUMNS = [
    "survived",
    "sex",
    "age",
    "n_siblings_spouses",
    "parch",
    "fare",
    "class",
    "deck",
    "embark_town",
    "alone",
]
VOCAB = {
    "sex": ["male", "female"],
    "class": ["First", "Second", "Third"],
    "deck": ["unknown", "A", "B", "C", "D", "E", "F", "G"],
    "embark_town": ["Southampton", "Cherbourg", "Queenstown", "unknown"],
    "alone": ["y", "n"],
}
# make_csv_dataset's inferred types for these columns: int32, float32 or string.
DEFAULTS = [
    tf.constant(0, tf.int32),
    "",
    tf.constant(0.0),
    tf.constant(0, tf.int32),
    tf.constant(0, tf.int32),
    tf.constant(0.0),
    "",
    "",
    "",
    "",
]


# The Titanic training CSV has 627 rows; "full" writes 494,000 rows (the size at which a
# make_csv_dataset pipeline has been seen to need batching: issue 30).
FULL = 494_000


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(7)
    lines = [",".join(COLUMNS)]
    for _ in range(count(size, 627, FULL)):
        row = [
            str(rng.integers(0, 2)),
            rng.choice(VOCAB["sex"]),
            f"{rng.uniform(1, 80):.1f}",
            str(rng.integers(0, 5)),
            str(rng.integers(0, 4)),
            f"{rng.uniform(5, 200):.4f}",
            rng.choice(VOCAB["class"]),
            rng.choice(VOCAB["deck"]),
            rng.choice(VOCAB["embark_town"]),
            rng.choice(VOCAB["alone"]),
        ]
        lines.append(",".join(row))
    (Path(dir) / "train.csv").write_text("\n".join(lines) + "\n")


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    titanic_file_path = str(Path(dir) / "train.csv")
    titanic_csv_ds = tf.data.experimental.make_csv_dataset(
        titanic_file_path,
        batch_size=batch_size,
        label_name="survived",
        num_epochs=1,
        ignore_errors=True,
    )
    # Keras 3 flattens make_csv_dataset's OrderedDict in column order but the model's dict
    # inputs in sorted order: model.fit fails ("Cast string to float is not supported")
    # unless the features become a plain dict, the one line a Keras 3 user has to add.
    return titanic_csv_ds.map(lambda features, label: (dict(features), label))


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    def decode(lines):
        values = tf.io.decode_csv(lines, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, values, strict=True))
        return features, features.pop("survived")

    ds = tf.data.TextLineDataset(str(Path(dir) / "train.csv")).skip(1)
    ds = ds.shuffle(10000).batch(batch_size)
    return ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    inputs = {}
    for name in COLUMNS[1:]:
        dtype = "string" if name in VOCAB else "float32"
        inputs[name] = keras.Input(shape=(1,), name=name, dtype=dtype)
    numeric_inputs = {n: i for n, i in inputs.items() if n not in VOCAB}
    x = layers.Concatenate()(list(numeric_inputs.values()))
    # norm.adapt(titanic numeric columns) in the tutorial; the stand-in's statistics here.
    norm = layers.Normalization(mean=[40.0, 2.0, 1.5, 100.0], variance=[520.0, 2.0, 1.25, 3200.0])
    preprocessed_inputs = [norm(x)]
    for name, inp in inputs.items():
        if name not in VOCAB:
            continue
        lookup = layers.StringLookup(vocabulary=np.unique(VOCAB[name]))
        one_hot = layers.CategoryEncoding(num_tokens=lookup.vocabulary_size())
        preprocessed_inputs.append(one_hot(lookup(inp)))
    preprocessed = layers.Concatenate()(preprocessed_inputs)
    body = keras.Sequential([layers.Dense(64, activation="relu"), layers.Dense(1)])
    m = keras.Model(inputs, body(preprocessed))
    m.compile(
        loss=keras.losses.BinaryCrossentropy(from_logits=True), optimizer=keras.optimizers.Adam()
    )
    return m
