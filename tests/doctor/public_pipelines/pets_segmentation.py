"""Oxford-IIIT pets from TFDS: image and mask resized per example, cached, flipped per batch.

Source: tensorflow/docs site/en/tutorials/images/segmentation.ipynb ("Image segmentation":
dataset['train'].map(load_image, num_parallel_calls=AUTOTUNE), then cache, shuffle(1000),
batch(64), repeat, map(Augment()) (two RandomFlip layers with seed=42), prefetch; a U-Net
with 3 output channels). tfds.load('oxford_iiit_pet:3.*.*') reads a stand-in TFDS dataset
with the features the tutorial uses (_tfds.py).

Flaw: the Augment layer runs on every batch in one sequential map after the repeat.
Twin: the same up to the batch; the flip map in parallel, with the two layers fused into
one call on image and mask stacked together.
Compared: with augment=False (the flips are random), the first epoch (LIMIT examples: the
pipeline repeats forever), ignoring order.
"""

from __future__ import annotations

import keras
import tensorflow as tf

SOURCE = "tensorflow/docs site/en/tutorials/images/segmentation.ipynb (Image segmentation)"
FORMAT = "TFDS (TFRecord shards of JPEG images and PNG masks)"
FLAW = "sequential per-batch Keras augmentation map after repeat"
TWIN = "parallel flip map on image and mask stacked"
BATCH_SIZE = 16  # the tutorial's 64, smaller for the stand-in's 48 training images
SAME_KWARGS = {"augment": False}
LIMIT = 48  # the stand-in's training images: one epoch
BUFFER_SIZE = 1000


# oxford_iiit_pet's 3,680 training images (and 3,669 test images).
FULL = 3_680


def make_data(dir: str, size: str = "small") -> None:
    from . import _tfds

    _tfds.prepare(_tfds.PETS, dir, size)


def normalize(input_image, input_mask):
    input_image = tf.cast(input_image, tf.float32) / 255.0
    input_mask -= 1
    return input_image, input_mask


def load_image(datapoint):
    input_image = tf.image.resize(datapoint["image"], (128, 128))
    input_mask = tf.image.resize(
        datapoint["segmentation_mask"],
        (128, 128),
        method=tf.image.ResizeMethod.NEAREST_NEIGHBOR,
    )
    input_image, input_mask = normalize(input_image, input_mask)
    return input_image, input_mask


class Augment(keras.layers.Layer):
    def __init__(self, seed=42):
        super().__init__()
        # both use the same seed, so they'll make the same random changes.
        self.augment_inputs = keras.layers.RandomFlip(mode="horizontal", seed=seed)
        self.augment_labels = keras.layers.RandomFlip(mode="horizontal", seed=seed)

    def call(self, inputs, labels):
        inputs = self.augment_inputs(inputs)
        labels = self.augment_labels(labels)
        return inputs, labels


def _train(dir: str) -> tf.data.Dataset:
    import tensorflow_datasets as tfds

    from . import _tfds

    dataset = tfds.load(_tfds.PETS, data_dir=dir)
    return dataset["train"].map(load_image, num_parallel_calls=tf.data.AUTOTUNE)


def original(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    train_batches = _train(dir).cache().shuffle(BUFFER_SIZE).batch(batch_size).repeat()
    if augment:
        train_batches = train_batches.map(Augment())
    return train_batches.prefetch(buffer_size=tf.data.AUTOTUNE)


def tuned(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    flip = keras.layers.RandomFlip(mode="horizontal", seed=42)

    def augment_both(images, masks):
        both = flip(tf.concat([images, tf.cast(masks, tf.float32)], axis=-1))
        return both[..., :3], tf.cast(both[..., 3:], masks.dtype)

    ds = _train(dir).cache().shuffle(BUFFER_SIZE).batch(batch_size).repeat()
    if augment:
        ds = ds.map(augment_both, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """The tutorial's U-Net shape (a MobileNetV2 encoder, pix2pix upsampling) made small."""
    inputs = keras.layers.Input(shape=[128, 128, 3])
    d1 = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(inputs)
    d2 = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(d1)
    u1 = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(d2)
    x = keras.layers.Concatenate()([u1, d1])
    outputs = keras.layers.Conv2DTranspose(3, 3, strides=2, padding="same")(x)
    m = keras.Model(inputs=inputs, outputs=outputs)
    m.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
