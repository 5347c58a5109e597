"""Fashion-MNIST numpy arrays through d2l's loader: resized per batch after a batch shuffle.

Source: d2l-ai/d2l-en chapter_linear-networks/image-classification-dataset.md
(Dive into Deep Learning, "The Image Classification Dataset", TensorFlow tab,
load_data_fashion_mnist(batch_size, resize): the whole array processed eagerly
(expand_dims, / 255), from_tensor_slices(...).batch(batch_size).shuffle(len(train))
.map(resize_fn) with tf.image.resize_with_pad; the chapter's resize=64 test; later chapters
train CNNs on it). keras.datasets.fashion_mnist.load_data() becomes an .npz stand-in.

Flaw: shuffle after batch (the same batches every epoch, only their order changes), the
resize map sequential, no prefetch; the whole training set is a graph constant.
Twin: the uint8 arrays sliced as they are, examples shuffled, batched, scaled and resized
per batch in a parallel map, prefetch.
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = (
    "d2l-ai/d2l-en chapter_linear-networks/image-classification-dataset.md "
    "(Dive into Deep Learning: The Image Classification Dataset)"
)
FORMAT = "numpy arrays (.npz of uint8 images)"
FLAW = "shuffle after batch, sequential resize map, no prefetch, data as a graph constant"
TWIN = "uint8 slices, shuffle examples, batch, parallel scale+resize, prefetch"
BATCH_SIZE = 32
RESIZE = 64


# Fashion-MNIST's training images.
FULL = 60000


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(14)
    n = count(size, 512, FULL)
    np.savez(
        Path(dir) / "fashion-mnist.npz",
        x_train=rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, size=n, dtype=np.uint8),
    )


def _load(dir: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(Path(dir) / "fashion-mnist.npz") as f:  # fashion_mnist.load_data()
        return f["x_train"], f["y_train"]


def original(dir: str, batch_size: int = BATCH_SIZE, resize: int = RESIZE) -> tf.data.Dataset:
    mnist_train = _load(dir)

    def process(X, y):
        return tf.expand_dims(X, axis=3) / 255, tf.cast(y, dtype="int32")

    def resize_fn(X, y):
        return (tf.image.resize_with_pad(X, resize, resize) if resize else X, y)

    return (
        tf.data.Dataset.from_tensor_slices(process(*mnist_train))
        .batch(batch_size)
        .shuffle(len(mnist_train[0]))
        .map(resize_fn)
    )


def tuned(dir: str, batch_size: int = BATCH_SIZE, resize: int = RESIZE) -> tf.data.Dataset:
    x, y = _load(dir)

    def scale_and_resize(X, y):
        X = tf.cast(tf.expand_dims(X, axis=3), tf.float32) / 255
        return tf.image.resize_with_pad(X, resize, resize), tf.cast(y, "int32")

    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).batch(batch_size)
    return ds.map(scale_and_resize, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A LeNet-style CNN as the book's later chapters train on this loader."""
    m = keras.Sequential(
        [
            keras.Input((RESIZE, RESIZE, 1)),
            keras.layers.Conv2D(6, 5, strides=2, activation="sigmoid"),
            keras.layers.AveragePooling2D(2),
            keras.layers.Conv2D(16, 5, activation="sigmoid"),
            keras.layers.AveragePooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(32, activation="sigmoid"),
            keras.layers.Dense(10),
        ]
    )
    m.compile(
        optimizer=keras.optimizers.SGD(0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
