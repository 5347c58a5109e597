"""pix2pix facades: side-by-side JPEGs split, jittered per example with tf.random, batch 1.

Source: tensorflow/docs site/en/tutorials/generative/pix2pix.ipynb ("pix2pix: Image-to-image
translation with a conditional GAN": list_files('train/*.jpg'), map(load_image_train,
num_parallel_calls=AUTOTUNE) with load (read, decode_jpeg, split in two halves, cast
float32), random_jitter (a tf.function: resize to 286x286, random_crop to 256x256, a Python
`if tf.random.uniform(()) > 0.5` flip), normalize to [-1, 1]; shuffle(400); batch(1)). The
tutorial trains a GAN in its own loop; model() is a small generator with the L1 term of its
loss, trained as model.fit would.

Flaw: decode, split and a 286x286 resize of every file every epoch (no cache), shuffle
after the costly map, batch of 1, no prefetch.
Twin: decode and split once in a parallel map, cache the uint8 halves, shuffle the cached
pairs, jitter in a parallel map, batch, prefetch.
Compared: with augment=False (the jitter is unseeded: both skip it), one epoch, ignoring
order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, picture

SOURCE = "tensorflow/docs site/en/tutorials/generative/pix2pix.ipynb (pix2pix)"
FORMAT = "JPEG files (two 256x256 images side by side)"
FLAW = "per-file decode + resize 286 + random crop every epoch, shuffle after map, batch 1"
TWIN = "decode+split once, cache uint8, shuffle, parallel jitter, batch, prefetch"
BATCH_SIZE = 1
SAME_KWARGS = {"augment": False}
BUFFER_SIZE = 400
IMG_WIDTH = IMG_HEIGHT = 256


# CMP Facades' training pairs.
FULL = 400


def make_data(dir: str, size: str = "small") -> None:
    train = Path(dir) / "facades" / "train"
    train.mkdir(parents=True)
    rng = np.random.default_rng(3)
    for i in range(count(size, 12, FULL)):
        image = picture(rng, IMG_HEIGHT, 2 * IMG_WIDTH, tint=i)
        (train / f"{i + 1}.jpg").write_bytes(tf.io.encode_jpeg(image).numpy())


def load(image_file):
    image = tf.io.read_file(image_file)
    image = tf.io.decode_jpeg(image)
    w = tf.shape(image)[1]
    w = w // 2
    input_image = image[:, w:, :]
    real_image = image[:, :w, :]
    input_image = tf.cast(input_image, tf.float32)
    real_image = tf.cast(real_image, tf.float32)
    return input_image, real_image


def resize(input_image, real_image, height, width):
    input_image = tf.image.resize(
        input_image, [height, width], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR
    )
    real_image = tf.image.resize(
        real_image, [height, width], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR
    )
    return input_image, real_image


def random_crop(input_image, real_image):
    stacked_image = tf.stack([input_image, real_image], axis=0)
    cropped_image = tf.image.random_crop(stacked_image, size=[2, IMG_HEIGHT, IMG_WIDTH, 3])
    return cropped_image[0], cropped_image[1]


def normalize(input_image, real_image):
    input_image = (input_image / 127.5) - 1
    real_image = (real_image / 127.5) - 1
    return input_image, real_image


@tf.function()
def random_jitter(input_image, real_image):
    input_image, real_image = resize(input_image, real_image, 286, 286)
    input_image, real_image = random_crop(input_image, real_image)
    if tf.random.uniform(()) > 0.5:
        input_image = tf.image.flip_left_right(input_image)
        real_image = tf.image.flip_left_right(real_image)
    return input_image, real_image


def original(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    PATH = Path(dir) / "facades"

    def load_image_train(image_file):
        input_image, real_image = load(image_file)
        if augment:
            input_image, real_image = random_jitter(input_image, real_image)
        input_image, real_image = normalize(input_image, real_image)
        return input_image, real_image

    train_dataset = tf.data.Dataset.list_files(str(PATH / "train/*.jpg"))
    train_dataset = train_dataset.map(load_image_train, num_parallel_calls=tf.data.AUTOTUNE)
    train_dataset = train_dataset.shuffle(BUFFER_SIZE)
    train_dataset = train_dataset.batch(batch_size)
    return train_dataset


def tuned(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    AUTOTUNE = tf.data.AUTOTUNE

    def halves(image_file):
        image = tf.io.decode_jpeg(tf.io.read_file(image_file))
        w = tf.shape(image)[1] // 2
        return image[:, w:, :], image[:, :w, :]

    def jitter(input_image, real_image):
        input_image, real_image = tf.cast(input_image, tf.float32), tf.cast(real_image, tf.float32)
        if augment:
            input_image, real_image = random_jitter(input_image, real_image)
        return normalize(input_image, real_image)

    files = tf.data.Dataset.list_files(str(Path(dir) / "facades" / "train/*.jpg"), shuffle=False)
    ds = files.map(halves, num_parallel_calls=AUTOTUNE).cache().shuffle(BUFFER_SIZE)
    return ds.map(jitter, num_parallel_calls=AUTOTUNE).batch(batch_size).prefetch(AUTOTUNE)


def model() -> keras.Model:
    """A small U-Net generator; loss: the L1 term of the tutorial's generator loss."""
    inputs = keras.layers.Input(shape=[256, 256, 3])
    d1 = keras.layers.Conv2D(8, 4, strides=2, padding="same")(inputs)
    d1 = keras.layers.LeakyReLU()(d1)
    d2 = keras.layers.Conv2D(16, 4, strides=2, padding="same")(d1)
    d2 = keras.layers.LeakyReLU()(d2)
    u1 = keras.layers.Conv2DTranspose(8, 4, strides=2, padding="same", activation="relu")(d2)
    x = keras.layers.Concatenate()([u1, d1])
    last = keras.layers.Conv2DTranspose(3, 4, strides=2, padding="same", activation="tanh")
    m = keras.Model(inputs=inputs, outputs=last(x))
    m.compile(optimizer=keras.optimizers.Adam(2e-4, beta_1=0.5), loss="mean_absolute_error")
    return m
