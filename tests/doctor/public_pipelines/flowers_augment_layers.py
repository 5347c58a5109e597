"""tf_flowers from TFDS, resized by Keras layers one image at a time, augmented per batch.

Source: tensorflow/docs site/en/tutorials/images/data_augmentation.ipynb ("Data
augmentation", section "Apply the preprocessing layers to your datasets": prepare(ds,
shuffle=True, augment=True) maps resize_and_rescale (a Sequential of Resizing(180, 180) and
Rescaling(1./255)) per example, shuffle(1000), batch, maps data_augmentation
(RandomFlip("horizontal_and_vertical"), RandomRotation(0.2)) per batch, prefetch; the
tutorial's CNN). tfds.load('tf_flowers', split='train[:80%]', as_supervised=True) reads a
stand-in TFDS dataset with tf_flowers' features (_tfds.py).

Flaw: a Keras Sequential called per example (decode + resize of every image every epoch,
no cache), and the Keras augmentation layers on every batch.
Twin: decode and resize once in a parallel map, cache the resized images, shuffle, batch,
augment per batch in parallel, prefetch.
Compared: with augment=False (RandomFlip and RandomRotation are unseeded), one epoch,
ignoring order.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import layers

from .flowers_keras_utility import model  # noqa: F401  (the same CNN, 180x180 inputs)

SOURCE = "tensorflow/docs site/en/tutorials/images/data_augmentation.ipynb (Data augmentation)"
FORMAT = "TFDS (TFRecord shards of JPEG-encoded images)"
FLAW = "Keras Resizing+Rescaling per example, every epoch, no cache; Keras augmentation per batch"
TWIN = "parallel decode+resize once, cache, shuffle, batch, parallel augment, prefetch"
BATCH_SIZE = 32
SAME_KWARGS = {"augment": False}
IMG_SIZE = 180


# tf_flowers' 3,670 images.
FULL = 3_670


def make_data(dir: str, size: str = "small") -> None:
    from . import _tfds

    _tfds.prepare(_tfds.FLOWERS, dir, size)


def _load(dir: str) -> tf.data.Dataset:
    import tensorflow_datasets as tfds

    from . import _tfds

    return tfds.load(_tfds.FLOWERS, split="train[:80%]", as_supervised=True, data_dir=dir)


def _layers() -> tuple[keras.Sequential, keras.Sequential]:
    resize_and_rescale = keras.Sequential(
        [layers.Resizing(IMG_SIZE, IMG_SIZE), layers.Rescaling(1.0 / 255)]
    )
    data_augmentation = keras.Sequential(
        [layers.RandomFlip("horizontal_and_vertical"), layers.RandomRotation(0.2)]
    )
    return resize_and_rescale, data_augmentation


def original(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    train_ds = _load(dir)
    resize_and_rescale, data_augmentation = _layers()
    AUTOTUNE = tf.data.AUTOTUNE

    def prepare(ds, shuffle=False, augment=False):
        ds = ds.map(lambda x, y: (resize_and_rescale(x), y), num_parallel_calls=AUTOTUNE)
        if shuffle:
            ds = ds.shuffle(1000)
        ds = ds.batch(batch_size)
        if augment:
            ds = ds.map(
                lambda x, y: (data_augmentation(x, training=True), y),
                num_parallel_calls=AUTOTUNE,
            )
        return ds.prefetch(buffer_size=AUTOTUNE)

    return prepare(train_ds, shuffle=True, augment=augment)


def tuned(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    resize_and_rescale, data_augmentation = _layers()
    AUTOTUNE = tf.data.AUTOTUNE

    def resize(x, y):
        return resize_and_rescale(x), y

    ds = _load(dir).map(resize, num_parallel_calls=AUTOTUNE).cache()
    ds = ds.shuffle(1000).batch(batch_size)
    if augment:
        ds = ds.map(
            lambda x, y: (data_augmentation(x, training=True), y), num_parallel_calls=AUTOTUNE
        )
    return ds.prefetch(AUTOTUNE)
