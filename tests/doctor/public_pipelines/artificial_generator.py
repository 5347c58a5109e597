"""The tf.data performance guide's ArtificialDataset: a generator that waits like a file.

Source: tensorflow/docs site/en/guide/data_performance.ipynb ("Better performance with the
tf.data API": ArtificialDataset, a from_generator whose generator sleeps 0.03 s to "open a
file" and 0.015 s per "read"; mapped_function, a tf.py_function that sleeps 0.03 s for
"hard pre-processing"; the naive pipeline ArtificialDataset().map(mapped_function)). The
guide consumes single samples in a sleeping loop; to train, each sample becomes (x, y) and
is batched. make_data writes nothing: the data is the generator.

Flaw: one generator read sequentially (I/O latency in the GIL's Python), a sequential
py_function map, no prefetch.
Twin: the guide's own advice: the samples split across generators read by a parallel
interleave, the map parallel, prefetch.
Compared: one epoch, ignoring order (both yield samples 0..NUM_SAMPLES-1 once).
"""

from __future__ import annotations

import time
from pathlib import Path

import keras
import tensorflow as tf

SOURCE = (
    "tensorflow/docs site/en/guide/data_performance.ipynb (Better performance with the tf.data API)"
)
FORMAT = "a Python generator with I/O latency (from_generator)"
FLAW = "from_generator read sequentially, sequential py_function map, no prefetch"
TWIN = "parallel interleave of generators over shards, parallel map, prefetch"
BATCH_SIZE = 8
NUM_SAMPLES = 24
SHARDS = 4


# ArtificialDataset generates its 3 samples itself: there is no data to scale.
FULL = 3


def make_data(dir: str, size: str = "small") -> None:
    (Path(dir) / "README").write_text("ArtificialDataset generates its samples\n")


class ArtificialDataset(tf.data.Dataset):
    def _generator(num_samples, start=0):
        # Opening the file
        time.sleep(0.03)
        for sample_idx in range(start, start + num_samples):
            # Reading data (line, record) from the file
            time.sleep(0.015)
            yield (sample_idx,)

    def __new__(cls, num_samples=3, start=0):
        return tf.data.Dataset.from_generator(
            cls._generator,
            output_signature=tf.TensorSpec(shape=(1,), dtype=tf.int64),
            args=(num_samples, start),
        )


def mapped_function(s):
    # Do some hard pre-processing
    tf.py_function(lambda: time.sleep(0.03), [], ())
    return s


def to_example(s):
    x = tf.cast(s, tf.float32)
    return x, 2.0 * x


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    ds = ArtificialDataset(NUM_SAMPLES).map(mapped_function)
    return ds.map(to_example).batch(batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    per = NUM_SAMPLES // SHARDS
    ds = tf.data.Dataset.range(SHARDS).interleave(
        lambda i: ArtificialDataset(per, i * per),
        cycle_length=SHARDS,
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    ds = ds.map(mapped_function, num_parallel_calls=tf.data.AUTOTUNE).map(to_example)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    return m
