"""Shakespeare as characters, cut into 101-character windows with window + flat_map.

Source: ageron/handson-ml3 16_nlp_with_rnns_and_attention.ipynb (Hands-On Machine Learning,
3rd ed., chapter 16, "Generating Shakespearean Text Using a Character RNN": TextVectorization
(split="character", standardize="lower") adapted on the text, encoded - 2; to_dataset:
from_tensor_slices(sequence), window(length + 1, shift=1, drop_remainder=True),
flat_map(lambda w: w.batch(length + 1)), shuffle(100_000, seed=42), batch(32),
map(lambda w: (w[:, :-1], w[:, 1:])), prefetch(1); Embedding(n_tokens, 16), GRU(128,
return_sequences=True), Dense(n_tokens, softmax)). The stand-in text uses the 39 characters
of the real one.

Flaw: window + flat_map builds a dataset per window (one per character of the text), then
batches each; prefetch(1).
Twin: shuffled window starts, batched, one gather per batch from the encoded text and the
shift in a parallel map, prefetch.
Compared: one epoch, ignoring order (both share one encoding per folder).
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = (
    "ageron/handson-ml3 16_nlp_with_rnns_and_attention.ipynb "
    "(Hands-On ML 3rd ed., ch. 16: Natural Language Processing with RNNs and Attention)"
)
FORMAT = "a text file, as characters"
FLAW = "window(101, shift=1) + flat_map: a dataset per window; prefetch(1)"
TWIN = "shuffled starts batched, one gather per batch, parallel map, prefetch"
BATCH_SIZE = 32
CHARS = "\n !$&',-.3:;?abcdefghijklmnopqrstuvwxyz"  # the 39 characters of the real text
n_tokens = len(CHARS)
length = 100
_ENCODED: dict[str, np.ndarray] = {}


# tinyshakespeare's characters.
FULL = 1115394


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(17)
    text = "".join(rng.choice(list(CHARS), size=count(size, 3000, FULL)))
    (Path(dir) / "shakespeare.txt").write_text(CHARS + text)


def _encoded(dir: str) -> np.ndarray:
    if dir not in _ENCODED:
        shakespeare_text = (Path(dir) / "shakespeare.txt").read_text()
        text_vec_layer = keras.layers.TextVectorization(split="character", standardize="lower")
        text_vec_layer.adapt([shakespeare_text])
        encoded = text_vec_layer([shakespeare_text])[0]
        _ENCODED[dir] = (encoded - 2).numpy()  # drop tokens 0 (pad) and 1 (unknown)
    return _ENCODED[dir]


def to_dataset(sequence, length, shuffle=False, seed=None, batch_size=32):
    ds = tf.data.Dataset.from_tensor_slices(sequence)
    ds = ds.window(length + 1, shift=1, drop_remainder=True)
    ds = ds.flat_map(lambda window_ds: window_ds.batch(length + 1))
    if shuffle:
        ds = ds.shuffle(100_000, seed=seed)
    ds = ds.batch(batch_size)
    return ds.map(lambda window: (window[:, :-1], window[:, 1:])).prefetch(1)


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    return to_dataset(_encoded(dir), length=length, shuffle=True, seed=42, batch_size=batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    encoded = tf.constant(_encoded(dir))
    starts = int(encoded.shape[0]) - length

    def windows(start):
        idx = start[:, None] + tf.range(length + 1, dtype=start.dtype)[None, :]
        window = tf.gather(encoded, idx)
        return window[:, :-1], window[:, 1:]

    ds = tf.data.Dataset.range(starts).shuffle(100_000, seed=42).batch(batch_size)
    return ds.map(windows, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    m = keras.Sequential(
        [
            keras.Input((None,), dtype="int64"),
            keras.layers.Embedding(input_dim=n_tokens, output_dim=16),
            keras.layers.GRU(32, return_sequences=True),
            keras.layers.Dense(n_tokens, activation="softmax"),
        ]
    )
    m.compile(loss="sparse_categorical_crossentropy", optimizer="nadam", metrics=["accuracy"])
    return m
