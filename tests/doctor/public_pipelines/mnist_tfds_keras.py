"""MNIST from TFDS, normalized, cached, shuffled, batched, prefetched (the TFDS example).

Source: tensorflow/datasets docs/keras_example.ipynb ("Training a neural network on MNIST
with Keras": tfds.load('mnist', split=['train', 'test'], shuffle_files=True,
as_supervised=True, with_info=True); ds_train.map(normalize_img,
num_parallel_calls=AUTOTUNE).cache().shuffle(num_examples).batch(128).prefetch(AUTOTUNE);
Flatten + Dense(128) + Dense(10)). The stand-in TFDS dataset has mnist's features (_tfds.py).

Flaw: none to speak of; a control case (the TFDS team's tuned pipeline): the cache holds
float32 images, 4x the uint8 ones.
Twin: cache the uint8 images, normalize per batch after batching (one vectorized op).
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

import keras
import tensorflow as tf

SOURCE = (
    "tensorflow/datasets docs/keras_example.ipynb (Training a neural network on MNIST with Keras)"
)
FORMAT = "TFDS (TFRecord shards of PNG-encoded images)"
FLAW = "control: normalize per example then cache float32 (already tuned)"
TWIN = "cache uint8, normalize per batch"
BATCH_SIZE = 128


# mnist's 60,000 training images (and 10,000 test images).
FULL = 60_000


def make_data(dir: str, size: str = "small") -> None:
    from . import _tfds

    _tfds.prepare(_tfds.MNIST, dir, size)


def _load(dir: str):
    import tensorflow_datasets as tfds

    from . import _tfds

    (ds_train, ds_test), ds_info = tfds.load(
        _tfds.MNIST,
        split=["train", "test"],
        shuffle_files=True,
        as_supervised=True,
        with_info=True,
        data_dir=dir,
    )
    return ds_train, ds_info


def normalize_img(image, label):
    """Normalizes images: `uint8` -> `float32`."""
    return tf.cast(image, tf.float32) / 255.0, label


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    ds_train, ds_info = _load(dir)
    ds_train = ds_train.map(normalize_img, num_parallel_calls=tf.data.experimental.AUTOTUNE)
    ds_train = ds_train.cache()
    ds_train = ds_train.shuffle(ds_info.splits["train"].num_examples)
    ds_train = ds_train.batch(batch_size)
    ds_train = ds_train.prefetch(tf.data.experimental.AUTOTUNE)
    return ds_train


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    ds, info = _load(dir)
    ds = ds.cache().shuffle(info.splits["train"].num_examples).batch(batch_size)
    return ds.map(normalize_img, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    m = keras.models.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    m.compile(
        optimizer=keras.optimizers.Adam(0.001),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return m
