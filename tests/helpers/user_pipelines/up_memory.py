"""User pipelines over numpy arrays loaded into memory (x.npy, y.npy, images.npy,
wide.npy), written the way tutorials write them, each beside its hand-tuned twin
(`<name>_tuned`): `make_dataset(data_dir, batch_size=..., **kwargs)`."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
MEAN, SCALE = np.float32(0.25), np.float32(0.5)  # exact in float32: numpy and TF agree


def _load(data_dir, *names, dtype=None):
    out = tuple(np.load(f"{data_dir}/{n}.npy") for n in names)
    return tuple(a.astype(dtype) for a in out) if dtype else out


# ---- from_tensor_slices of a large array, normalized one image at a time ---------------------
def normalize(image, label):
    return tf.cast(image, tf.float32) / 255.0, label


def large_array(data_dir, batch_size=64, **kwargs):
    images, labels = _load(data_dir, "images", "y")
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.shuffle(len(images))
    dataset = dataset.map(normalize)
    dataset = dataset.batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def large_array_tuned(data_dir, batch_size=64, **kwargs):
    images, labels = _load(data_dir, "images", "y")
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images))
    ds = ds.batch(batch_size).map(normalize, num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


# ---- a Python generator ------------------------------------------------------------------------
def from_generator(data_dir, batch_size=64, **kwargs):
    x, y = _load(data_dir, "x", "y")

    def examples():
        for i in range(len(x)):
            yield x[i], y[i]

    signature = (tf.TensorSpec([32], tf.float32), tf.TensorSpec([1], tf.float32))
    dataset = tf.data.Dataset.from_generator(examples, output_signature=signature)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def from_generator_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(_load(data_dir, "x", "y"))
    return ds.batch(batch_size).prefetch(AUTOTUNE)


# ---- numpy_function per example ------------------------------------------------------------------
def standardize_np(x):
    return ((x - MEAN) * SCALE).astype(np.float32)


def numpy_function(data_dir, batch_size=64, **kwargs):
    def preprocess(x, y):
        x = tf.numpy_function(standardize_np, [x], tf.float32)
        x.set_shape([32])
        return x, y

    dataset = tf.data.Dataset.from_tensor_slices(_load(data_dir, "x", "y"))
    dataset = dataset.map(preprocess)
    return dataset.batch(batch_size)


def numpy_function_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(_load(data_dir, "x", "y")).batch(batch_size)
    ds = ds.map(lambda x, y: ((x - MEAN) * SCALE, y), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


# ---- float64 features (numpy's default dtype) ----------------------------------------------------
def float64(data_dir, batch_size=64, **kwargs):
    x, y = _load(data_dir, "x", "y", dtype="float64")  # e.g. from pandas
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    dataset = dataset.shuffle(1000).batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def float64_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(_load(data_dir, "x", "y", dtype="float32"))
    return ds.shuffle(1000).batch(batch_size).prefetch(AUTOTUNE)


# ---- "shuffle the whole dataset": 200M procedurally made examples --------------------------------
def synthesize(i):
    x = tf.random.stateless_normal([32], seed=tf.stack([i, tf.constant(7, tf.int64)]))
    return x, tf.cast(tf.reduce_sum(x, keepdims=True) > 0, tf.float32)


def huge_shuffle(data_dir, batch_size=64, examples=200_000_000, **kwargs):
    dataset = tf.data.Dataset.range(examples).map(synthesize)
    dataset = dataset.shuffle(examples)  # a buffer of ~50 GB: far beyond RAM
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def huge_shuffle_tuned(data_dir, batch_size=64, examples=200_000_000, **kwargs):
    # Shuffle 8-byte indices, not examples, with a buffer that fits.
    ds = tf.data.Dataset.range(examples).shuffle(min(examples, 100_000))
    ds = ds.map(synthesize, num_parallel_calls=AUTOTUNE, deterministic=False)
    return ds.batch(batch_size).prefetch(AUTOTUNE)


# ---- a model much slower than its input: no input advice --------------------------------------
def compute_bound(data_dir, batch_size=64, **kwargs):
    (wide,), (y,) = _load(data_dir, "wide"), _load(data_dir, "y")
    dataset = tf.data.Dataset.from_tensor_slices((wide, y))
    return dataset.shuffle(1000).batch(batch_size)


def compute_bound_tuned(data_dir, batch_size=64, **kwargs):
    return compute_bound(data_dir, batch_size).prefetch(AUTOTUNE)


# ---- a heavy batched augmentation run sequentially -----------------------------------------------
def _band(n: int = 32) -> np.ndarray:
    """A [n, n] matrix that blurs along one axis with the 1-4-6-4-1 kernel."""
    m = np.zeros((n, n), "float32")
    for i in range(n):
        for j, v in zip(range(i - 2, i + 3), (1, 4, 6, 4, 1), strict=True):
            if 0 <= j < n:
                m[i, j] = v / 16
    return m


BAND = tf.constant(_band())


def blur_and_jitter(images, labels, augment=True):
    """A separable 5x5 blur, four times over, plus random brightness (augmentation)."""
    x = tf.cast(images, tf.float32) / 255.0
    for _ in range(4):
        x = tf.einsum("ij,bjkc->bikc", BAND, x)
        x = tf.einsum("kj,bijc->bikc", BAND, x)
    if augment:
        x = x + tf.random.uniform([tf.shape(x)[0], 1, 1, 1], -0.1, 0.1)
    return x, labels


def _one_thread_per_op() -> tf.data.Options:
    # Each op on one thread, as on a host whose cores all feed an accelerator: otherwise the
    # einsums spread over both cores here and parallel calls gain little on a loaded host.
    options = tf.data.Options()
    options.threading.max_intra_op_parallelism = 1
    return options


def sequential_heavy_map(data_dir, batch_size=64, augment=True, **kwargs):
    dataset = tf.data.Dataset.from_tensor_slices(_load(data_dir, "images", "y"))
    dataset = dataset.with_options(_one_thread_per_op())
    dataset = dataset.shuffle(1000).batch(batch_size)
    dataset = dataset.map(lambda x, y: blur_and_jitter(x, y, augment))
    return dataset.prefetch(AUTOTUNE)


def sequential_heavy_map_tuned(data_dir, batch_size=64, augment=True, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(_load(data_dir, "images", "y"))
    ds = ds.with_options(_one_thread_per_op())
    ds = ds.shuffle(1000).batch(batch_size)
    ds = ds.map(
        lambda x, y: blur_and_jitter(x, y, augment),
        num_parallel_calls=AUTOTUNE,
        deterministic=False,
    )
    return ds.prefetch(AUTOTUNE)


# ---- cache after a random augmentation: every epoch replays epoch 1's augmentation ---------------
def flip_and_shift(image, label, augment=True):
    image = tf.cast(image, tf.float32) / 255.0
    if augment:
        image = tf.image.random_flip_left_right(image)
        image = image + tf.random.uniform([], -0.1, 0.1)
    return image, label


def cache_after_augment(data_dir, batch_size=64, augment=True, **kwargs):
    dataset = tf.data.Dataset.from_tensor_slices(_load(data_dir, "images", "y"))
    dataset = dataset.map(lambda x, y: flip_and_shift(x, y, augment))
    dataset = dataset.cache()
    dataset = dataset.shuffle(1000).batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def cache_after_augment_tuned(data_dir, batch_size=64, augment=True, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(_load(data_dir, "images", "y"))
    ds = ds.map(lambda x, y: flip_and_shift(x, y, False), num_parallel_calls=AUTOTUNE)
    ds = ds.cache().shuffle(1000)
    if augment:  # fresh augmentation every epoch, after the cache
        ds = ds.map(lambda x, y: flip_and_shift_float(x, y), num_parallel_calls=AUTOTUNE)
    return ds.batch(batch_size).prefetch(AUTOTUNE)


def flip_and_shift_float(image, label):
    image = tf.image.random_flip_left_right(image)
    return image + tf.random.uniform([], -0.1, 0.1), label
