"""tf_flowers from TFDS, augmented per example with stateless ops seeded by a Counter.

Source: tensorflow/docs site/en/tutorials/images/data_augmentation.ipynb ("Data
augmentation", section "Apply augmentation to a dataset", option 1:
tf.data.Dataset.zip((train_datasets, (counter, counter))), shuffle(1000),
map(augment, num_parallel_calls=AUTOTUNE) with resize_and_rescale, resize_with_crop_or_pad,
stateless_random_crop and stateless_random_brightness, batch, prefetch). The stand-in TFDS
dataset has tf_flowers' features (_tfds.py).

Flaw: every epoch decodes, casts, resizes and pads every image again before its random
crop (no cache of the deterministic part); the Counter is zipped before the shuffle and
restarts each epoch, so each image gets the same seed, hence the same crop, every epoch.
Twin: decode + resize + pad once in a parallel map, cached with the image's seed; per epoch
only the seeded crop and brightness (per example, parallel), then batch and prefetch.
Compared: as published (the seeds are deterministic), one epoch, ignoring order.
"""

from __future__ import annotations

import tensorflow as tf

from .flowers_augment_layers import FULL, _load, make_data  # noqa: F401
from .flowers_keras_utility import model  # noqa: F401  (the same CNN, 180x180 inputs)

SOURCE = "tensorflow/docs site/en/tutorials/images/data_augmentation.ipynb (Data augmentation)"
FORMAT = "TFDS (TFRecord shards of JPEG-encoded images)"
FLAW = "zip with a Counter, per-example decode+resize+pad every epoch before a seeded crop"
TWIN = "decode+resize+pad cached with each seed; only the seeded crop per epoch"
BATCH_SIZE = 32
IMG_SIZE = 180
AUTOTUNE = tf.data.AUTOTUNE


def resize_and_rescale(image, label):
    image = tf.cast(image, tf.float32)
    image = tf.image.resize(image, [IMG_SIZE, IMG_SIZE])
    image = image / 255.0
    return image, label


def augment(image_label, seed):
    image, label = image_label
    image, label = resize_and_rescale(image, label)
    image = tf.image.resize_with_crop_or_pad(image, IMG_SIZE + 6, IMG_SIZE + 6)
    # Make a new seed.
    new_seed = tf.random.split(seed, num=1)[0, :]
    # Random crop back to the original size.
    image = tf.image.stateless_random_crop(image, size=[IMG_SIZE, IMG_SIZE, 3], seed=seed)
    # Random brightness.
    image = tf.image.stateless_random_brightness(image, max_delta=0.5, seed=new_seed)
    image = tf.clip_by_value(image, 0, 1)
    return image, label


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    train_datasets = _load(dir)
    counter = tf.data.experimental.Counter()
    train_ds = tf.data.Dataset.zip((train_datasets, (counter, counter)))
    train_ds = (
        train_ds.shuffle(1000)
        .map(augment, num_parallel_calls=AUTOTUNE)
        .batch(batch_size)
        .prefetch(AUTOTUNE)
    )
    return train_ds


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    def padded(image_label, seed):
        image, label = resize_and_rescale(*image_label)
        image = tf.image.resize_with_crop_or_pad(image, IMG_SIZE + 6, IMG_SIZE + 6)
        return image, label, tf.stack(seed)

    def crop(image, label, seed):
        new_seed = tf.random.split(seed, num=1)[0, :]
        image = tf.image.stateless_random_crop(image, size=[IMG_SIZE, IMG_SIZE, 3], seed=seed)
        image = tf.image.stateless_random_brightness(image, max_delta=0.5, seed=new_seed)
        return tf.clip_by_value(image, 0, 1), label

    counter = tf.data.experimental.Counter()
    ds = tf.data.Dataset.zip((_load(dir), (counter, counter)))
    ds = ds.map(padded, num_parallel_calls=AUTOTUNE).cache().shuffle(1000)
    ds = ds.map(crop, num_parallel_calls=AUTOTUNE)
    return ds.batch(batch_size).prefetch(AUTOTUNE)
