"""Flowers read file by file with tf.data, as the tutorial's "finer control" section does.

Source: tensorflow/docs site/en/tutorials/load_data/images.ipynb ("Load and preprocess
images", section "Using tf.data for finer control": list_files(shuffle=False), a one-time
shuffle(image_count, reshuffle_each_iteration=False), skip(val_size), map(process_path,
num_parallel_calls=AUTOTUNE), configure_for_performance: cache, shuffle(1000), batch,
prefetch).

Flaw: little; a control case (a tuned tutorial pipeline: the doctor must not slow it down).
The cache holds 180x180 float32 images (resized before caching).
Twin: the same pipeline with options.deterministic=False (what an engineer would add;
nothing else is worth an afternoon here).
Compared: with val_fraction=0 (the tutorial's unseeded split would hand each pipeline
different files), one epoch, ignoring order.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from ._shared import count, write_jpegs
from .flowers_keras_utility import CLASSES, model  # noqa: F401  (the same tutorial's CNN)

SOURCE = "tensorflow/docs site/en/tutorials/load_data/images.ipynb (Load and preprocess images)"
FORMAT = "JPEG folders (one per class)"
FLAW = "control: parallel decode, cache, shuffle, batch, prefetch (already tuned)"
TWIN = "the same, non-deterministic order"
BATCH_SIZE = 32
SAME_KWARGS = {"val_fraction": 0.0}
img_height = img_width = 180


# flower_photos' 3,670 JPEGs (about 734 a class, most near 320x240 to 500x333 pixels).
FULL = 3_670


def make_data(dir: str, size: str = "small") -> None:
    per_class = count(size, 10, FULL // len(CLASSES))
    large = size == "full"
    write_jpegs(Path(dir) / "flower_photos", CLASSES, per_class, seed=2, large=large)


def original(dir: str, batch_size: int = BATCH_SIZE, val_fraction: float = 0.2):
    data_dir = Path(dir) / "flower_photos"
    image_count = len(list(data_dir.glob("*/*.jpg")))
    list_ds = tf.data.Dataset.list_files(str(data_dir / "*/*"), shuffle=False)
    list_ds = list_ds.shuffle(image_count, reshuffle_each_iteration=False)
    class_names = np.array(sorted([item.name for item in data_dir.glob("*")]))
    val_size = int(image_count * val_fraction)
    train_ds = list_ds.skip(val_size)

    def get_label(file_path):
        parts = tf.strings.split(file_path, os.path.sep)
        one_hot = parts[-2] == class_names
        return tf.argmax(one_hot)

    def decode_img(img):
        img = tf.io.decode_jpeg(img, channels=3)
        return tf.image.resize(img, [img_height, img_width])

    def process_path(file_path):
        label = get_label(file_path)
        img = tf.io.read_file(file_path)
        img = decode_img(img)
        return img, label

    AUTOTUNE = tf.data.AUTOTUNE
    train_ds = train_ds.map(process_path, num_parallel_calls=AUTOTUNE)

    def configure_for_performance(ds):
        ds = ds.cache()
        ds = ds.shuffle(buffer_size=1000)
        ds = ds.batch(batch_size)
        ds = ds.prefetch(buffer_size=AUTOTUNE)
        return ds

    return configure_for_performance(train_ds)


def tuned(dir: str, batch_size: int = BATCH_SIZE, val_fraction: float = 0.2):
    ds = original(dir, batch_size, val_fraction)
    options = tf.data.Options()
    options.deterministic = False
    return ds.with_options(options)
