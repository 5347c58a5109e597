"""Flowers from a folder of JPEGs through Keras' utility, cached and prefetched.

Source: tensorflow/docs site/en/tutorials/load_data/images.ipynb ("Load and preprocess
images", section "Load data using a Keras utility": image_dataset_from_directory with
validation_split=0.2, subset="training", seed=123, then train_ds.cache().prefetch(AUTOTUNE),
and the tutorial's Sequential CNN with Rescaling(1./255) in front).

Flaw: the utility shuffles and batches before the cache, so the cache keeps the first
epoch's batches and replays them (same batches, same order) every epoch; the resize to
180x180 float32 is cached at 4 bytes a pixel.
Twin: the utility without batching (batch_size=None: the same files of the same split),
cache of the decoded examples, shuffle, batch, prefetch.
Compared: one epoch, ignoring order (the utility's shuffle is seeded, the twin's is not).
"""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from ._shared import count, write_jpegs

SOURCE = "tensorflow/docs site/en/tutorials/load_data/images.ipynb (Load and preprocess images)"
FORMAT = "JPEG folders (one per class)"
FLAW = "cache() after the utility's shuffle+batch: first epoch's batches replayed"
TWIN = "utility with batch_size=None, cache examples, shuffle, batch, prefetch"
BATCH_SIZE = 32
CLASSES = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
IMG = 180


# flower_photos' 3,670 JPEGs (about 734 a class, most near 320x240 to 500x333 pixels).
FULL = 3_670


def make_data(dir: str, size: str = "small") -> None:
    per_class = count(size, 10, FULL // len(CLASSES))
    large = size == "full"
    write_jpegs(Path(dir) / "flower_photos", CLASSES, per_class, seed=1, large=large)


def _utility(dir: str, batch_size: int | None) -> tf.data.Dataset:
    return keras.utils.image_dataset_from_directory(
        str(Path(dir) / "flower_photos"),
        validation_split=0.2,
        subset="training",
        seed=123,
        image_size=(IMG, IMG),
        batch_size=batch_size,
    )


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    train_ds = _utility(dir, batch_size)
    AUTOTUNE = tf.data.AUTOTUNE
    train_ds = train_ds.cache().prefetch(buffer_size=AUTOTUNE)
    return train_ds


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    ds = _utility(dir, None).cache()
    return ds.shuffle(1000).batch(batch_size).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    num_classes = 5
    m = keras.Sequential(
        [
            keras.Input((IMG, IMG, 3)),
            keras.layers.Rescaling(1.0 / 255),
            keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(num_classes),
        ]
    )
    m.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
