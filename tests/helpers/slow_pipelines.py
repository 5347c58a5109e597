"""Deliberately slow tf.data pipelines, one per doctor finding, and tiny Keras models.

Each pipeline is a run file's `data.pipeline` ('helpers.slow_pipelines:<name>'); it is clean
except for the one problem it demonstrates. Files, when needed, come from data.dir.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

DIM = 16
WIDE = 256
N = 512
AUTO = tf.data.AUTOTUNE


def arrays(n: int = N, dtype: str = "float32", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM)).astype(dtype)
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    return x, y


def write_records(directory: str | Path, files: int = 8, n: int = N) -> list[str]:
    """`files` TFRecord shards of Examples with x: float[DIM], y: float[1]."""
    x, y = arrays(n)
    out = []
    for f in range(files):
        path = str(Path(directory) / f"part-{f:02d}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for i in range(f, n, files):
                ex = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "x": tf.train.Feature(float_list=tf.train.FloatList(value=x[i])),
                            "y": tf.train.Feature(float_list=tf.train.FloatList(value=y[i])),
                        }
                    )
                )
                w.write(ex.SerializeToString())
        out.append(path)
    return out


SPEC = {"x": tf.io.FixedLenFeature([DIM], tf.float32), "y": tf.io.FixedLenFeature([1], tf.float32)}


def _files(config) -> list[str]:
    return sorted(str(p) for p in Path(config.data.dir).glob("*.tfrecord"))


def heavy_one(x: tf.Tensor) -> tf.Tensor:
    """~100 us of TF ops on one example (many small ops: per-call overhead dominates)."""
    m = tf.reshape(tf.tile(x, [DIM]), [DIM, DIM]) * 0.1
    for _ in range(12):
        m = tf.tanh(tf.matmul(m, m))
    return x + tf.reduce_mean(m)


def heavy_batch(x: tf.Tensor, rounds: int = 30) -> tf.Tensor:
    """A few ms of TF ops on a whole batch [B, DIM]."""
    m = tf.einsum("bi,bj->bij", x, x) * 0.1
    m = tf.tile(m, [1, 4, 4])
    for _ in range(rounds):
        m = tf.tanh(tf.matmul(m, m))
    return x + tf.reduce_mean(m, axis=[1, 2])[:, None]


def augment_batch(x: tf.Tensor) -> tf.Tensor:
    """heavy_batch plus random noise: content differs every epoch (not cacheable)."""
    return heavy_batch(x) + tf.random.uniform(tf.shape(x), maxval=1e-3)


def _slices(dtype: str = "float32") -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(arrays(dtype=dtype))


def _nd() -> tf.data.Options:
    opts = tf.data.Options()
    opts.deterministic = False
    return opts


# ---- one pipeline per finding ----------------------------------------------------------
def py_function(batch_size: int = 32):
    def numpy_work(x):
        m = np.outer(x, x)
        for _ in range(20):
            m = np.tanh(m @ m * 0.1)
        return (x + m.mean()).astype("float32")

    def fn(x, y):
        out = tf.numpy_function(numpy_work, [x], tf.float32)
        out.set_shape([DIM])
        return out, y

    ds = _slices().map(fn, num_parallel_calls=AUTO, deterministic=False)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def per_example_parse(config, batch_size: int = 32):
    files = tf.data.Dataset.from_tensor_slices(_files(config))
    ds = files.interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTO, deterministic=False
    )

    def parse(s):
        e = tf.io.parse_single_example(s, SPEC)
        return e["x"], e["y"]

    ds = ds.map(parse, num_parallel_calls=AUTO, deterministic=False)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def per_example_map(batch_size: int = 32):
    def fn(x, y):
        return heavy_one(x) + tf.random.uniform([DIM], maxval=1e-3), y

    ds = _slices().map(fn, num_parallel_calls=AUTO, deterministic=False)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def per_example_map_deterministic(batch_size: int = 32):
    """A batch-polymorphic per-example map without randomness (--fix may move it)."""
    ds = _slices().map(lambda x, y: (heavy_one(x) * 2.0 + 1.0, y), num_parallel_calls=AUTO)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def no_prefetch(batch_size: int = 32):
    ds = _slices().batch(batch_size)
    return ds.map(
        lambda x, y: (augment_batch(x), y), num_parallel_calls=AUTO, deterministic=False
    ).with_options(_nd())


def shuffle_over_budget(batch_size: int = 32):
    x, y = arrays()
    wide = np.repeat(x, WIDE // DIM, axis=1)  # 1 KiB per example
    ds = tf.data.Dataset.from_tensor_slices((wide, y)).shuffle(N)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def no_cache(batch_size: int = 32):
    ds = _slices().batch(batch_size)
    ds = ds.map(lambda x, y: (heavy_batch(x, 60), y), num_parallel_calls=AUTO, deterministic=False)
    return ds.prefetch(AUTO).with_options(_nd())


def float64(batch_size: int = 32):
    return _slices("float64").batch(batch_size).prefetch(AUTO).with_options(_nd())


def deterministic(batch_size: int = 32):
    ds = _slices().batch(batch_size)
    ds = ds.map(lambda x, y: (augment_batch(x), y), num_parallel_calls=AUTO, deterministic=True)
    return ds.prefetch(AUTO)


def from_generator(batch_size: int = 32):
    x, y = arrays()

    def gen():
        for i in range(len(x)):
            yield x[i], y[i]

    sig = (tf.TensorSpec([DIM], tf.float32), tf.TensorSpec([1], tf.float32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    return ds.batch(batch_size).prefetch(AUTO).with_options(_nd())


def clean(batch_size: int = 32):
    """A fast in-memory pipeline: batch, prefetch, nothing to fix."""
    return _slices().batch(batch_size, drop_remainder=True).cache().repeat().prefetch(AUTO)


def wide_clean(batch_size: int = 128):
    """In-memory batches of WIDE features."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(batch_size * 2, WIDE)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, drop_remainder=True)
    return ds.cache().repeat().prefetch(AUTO)


def tuned_clean(batch_size: int = 128):
    """Already tuned: in memory, parallel non-deterministic batch, cached, prefetched with
    AUTOTUNE. No rewrite of --fix applies, so whether one helps is never up to the noise."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(batch_size * 2, WIDE)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.batch(batch_size, drop_remainder=True, num_parallel_calls=AUTO, deterministic=False)
    return ds.cache().repeat().prefetch(AUTO)


# ---- models ----------------------------------------------------------------------------
def tiny_model():
    import keras

    return keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)], name="tiny")


def wide_tiny_model():
    import keras

    return keras.Sequential([keras.Input((WIDE,)), keras.layers.Dense(1)], name="wide_tiny")


def medium_model():
    import keras

    inputs = keras.Input((DIM,))
    h = keras.layers.Dense(64, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1)(h), name="medium")


def poly(x: tf.Tensor) -> tf.Tensor:
    """Works on one example [DIM] and on a batch [B, DIM] alike (batch-polymorphic)."""
    for _ in range(12):
        x = tf.tanh(x * 1.01 + tf.reduce_mean(x, axis=-1, keepdims=True))
    return x


def fixable(batch_size: int = 32):
    """Finite and deterministic, with a sequential per-example map and no prefetch."""
    return _slices().map(lambda x, y: (poly(x), y)).batch(batch_size)


def _nap_layer(seconds: float):
    """A Keras layer that sleeps `seconds` per call, i.e. per train step, whatever the batch
    (a fixed per-step cost that leaves the CPU to the rest of the machine)."""
    import time

    import keras

    class Nap(keras.layers.Layer):
        def call(self, x):
            def nap(t):
                time.sleep(seconds)
                return t

            y = tf.py_function(nap, [x], x.dtype)
            y.set_shape(x.shape)
            return y

    return Nap()


def step_cost_model():
    """10 ms per step whatever the batch: at a batch of 2 the fixed per-step cost sets the
    pace, 4x the batch is ~4x the examples/s, and the input's own per-step cost (a dequeue,
    tens of microseconds even on a busy machine) stays far below 5% of a step."""
    import keras

    inputs = keras.Input((DIM,))
    h = _nap_layer(0.01)(keras.layers.Dense(64, activation="relu")(inputs))
    return keras.Model(inputs, keras.layers.Dense(1)(h), name="step_cost")


def float32_slow_model():
    """Sleeps 20 ms per step when built under float32 only: the precision what-if then
    measures another policy faster on any CPU (the finding follows measurement)."""
    import keras

    inputs = keras.Input((WIDE,))
    h = keras.layers.Dense(64, activation="relu")(inputs)
    if keras.config.dtype_policy().name == "float32":
        h = _nap_layer(0.02)(h)
    return keras.Model(inputs, keras.layers.Dense(1, dtype="float32")(h), name="f32slow")
