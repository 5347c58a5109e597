"""CIFAR-10 images into two augmented views for self-supervised training (SimSiam).

Source: tensorflow/similarity examples/unsupervised_hello_world.ipynb (the pre-training
dataset: from_tensor_slices(x_train), repeat(), shuffle(1024), map(process,
num_parallel_calls=AUTOTUNE), batch(BATCH_SIZE=512), prefetch(AUTOTUNE); process = a
tf.function returning (view1, view2), each simsiam_augmenter(img, blur=False) then
img_scaling (imagenet_utils.preprocess_input, mode "torch"); simsiam_augmenter:
crop_and_resize (sample_distorted_bounding_box, area 0.2-1.0, bicubic resize to 32x32),
/255, random_apply(color_jitter_rand, p=0.8) with strengths drawn by np.random.uniform
(once, when the function is traced), random_apply(to_grayscale, p=0.2),
random_flip_left_right, *255 and clip), with tensorflow_similarity's augmentation_utils
(cropping.crop_and_resize, color_jitter.color_jitter_rand and to_grayscale,
random_apply.random_apply) ported inline: tensorflow_similarity is not installed here.

Flaw: every view augmented one image at a time (two crops, a random-order colour jitter of
four tf.conds, grayscale and flip per image), twice per example.
Twin: images shuffled and batched first, both views augmented for the whole batch: one
crop_and_resize with a box per image, brightness, contrast, saturation and hue with
per-image factors (a fixed order), grayscale and flip by per-image masks; prefetch.
Compared: with augment=False (both views are then the scaled image) and one epoch,
ignoring order; with augmentation the views are random and only their distribution is
alike.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = "tensorflow/similarity examples/unsupervised_hello_world.ipynb (SimSiam pre-training)"
FORMAT = "numpy arrays (CIFAR-10 images, .npz)"
KIND = "two views"
FLAW = "two views augmented per image in a map (crop, 4 random-order jitters, gray, flip)"
TWIN = "shuffle, batch, both views augmented per batch with per-image factors, prefetch"
BATCH_SIZE = 512
SAME_KWARGS = {"augment": False, "epochs": 1}
# CIFAR-10's 50,000 training images (the notebook keeps most of them in x_train).
FULL = 50_000
CIFAR_IMG_SIZE = 32


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 600, FULL)
    rng = np.random.default_rng(23)
    x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    np.savez(Path(dir) / "cifar10.npz", x_train=x, y_train=rng.integers(0, 10, n))


def _x_train(dir: str) -> np.ndarray:
    with np.load(Path(dir) / "cifar10.npz") as f:
        return f["x_train"]


# ---- tensorflow_similarity's augmentation_utils, as published --------------------------------
def distorted_bounding_box_crop(
    image,
    bbox,
    min_object_covered=0.1,
    aspect_ratio_range=(0.75, 1.33),
    area_range=(0.05, 1.0),
    max_attempts=100,
):
    shape = tf.shape(image)
    bbox_begin, bbox_size, _ = tf.image.sample_distorted_bounding_box(
        shape,
        bounding_boxes=bbox,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=max_attempts,
        use_image_if_no_bounding_boxes=True,
    )
    offset_y, offset_x, _ = tf.unstack(bbox_begin)
    target_height, target_width, _ = tf.unstack(bbox_size)
    return tf.image.crop_to_bounding_box(image, offset_y, offset_x, target_height, target_width)


def crop_and_resize(image, height, width, area_range=(0.08, 1.0)):
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
    aspect_ratio = width / height
    image = distorted_bounding_box_crop(
        image,
        bbox,
        min_object_covered=0.1,
        aspect_ratio_range=(3.0 / 4 * aspect_ratio, 4.0 / 3.0 * aspect_ratio),
        area_range=area_range,
        max_attempts=100,
    )
    return tf.image.resize([image], [height, width], method=tf.image.ResizeMethod.BICUBIC)[0]


def random_brightness(image, max_delta, impl="multiplicative"):
    if impl == "multiplicative":
        factor = tf.random.uniform([], tf.maximum(1.0 - max_delta, 0), 1.0 + max_delta)
        image = image * factor
    else:
        image = tf.image.random_brightness(image, max_delta=max_delta)
    return image


def color_jitter_rand(image, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0, impl="m"):
    def apply_transform(i, x):
        def brightness_foo():
            return x if brightness == 0 else random_brightness(x, brightness, impl)

        def contrast_foo():
            if contrast == 0:
                return x
            return tf.image.random_contrast(x, lower=1 - contrast, upper=1 + contrast)

        def saturation_foo():
            if saturation == 0:
                return x
            return tf.image.random_saturation(x, lower=1 - saturation, upper=1 + saturation)

        def hue_foo():
            return x if hue == 0 else tf.image.random_hue(x, max_delta=hue)

        return tf.cond(
            tf.less(i, 2),
            lambda: tf.cond(tf.less(i, 1), brightness_foo, contrast_foo),
            lambda: tf.cond(tf.less(i, 3), saturation_foo, hue_foo),
        )

    perm = tf.random.shuffle(tf.range(4))
    for i in range(4):
        image = apply_transform(perm[i], image)
        image = tf.clip_by_value(image, 0.0, 1.0)
    return image


def to_grayscale(image, keep_channels=True):
    image = tf.image.rgb_to_grayscale(image)
    if keep_channels:
        image = tf.tile(image, [1, 1, 3])
    return image


def random_apply(func, p, x):
    return tf.cond(
        tf.less(
            tf.random.uniform([], minval=0, maxval=1, dtype=tf.float32),
            tf.cast(p, tf.float32),
        ),
        lambda: func(x),
        lambda: x,
    )


# ---- the notebook ---------------------------------------------------------------------------
def img_scaling(img):
    return keras.applications.imagenet_utils.preprocess_input(img, data_format=None, mode="torch")


def _process(augment: bool):
    @tf.function
    def simsiam_augmenter(img, blur=True, area_range=(0.2, 1.0)):
        img = crop_and_resize(img, CIFAR_IMG_SIZE, CIFAR_IMG_SIZE, area_range=area_range)
        img /= 255.0

        def _jitter_transform(x):
            return color_jitter_rand(
                x,
                np.random.uniform(0.0, 0.4),
                np.random.uniform(0.0, 0.4),
                np.random.uniform(0.0, 0.4),
                np.random.uniform(0.0, 0.1),
                "multiplicative",
            )

        img = random_apply(_jitter_transform, p=0.8, x=img)
        img = random_apply(to_grayscale, p=0.2, x=img)
        img = tf.image.random_flip_left_right(img)
        img = img * 255.0
        return tf.clip_by_value(img, 0.0, 255.0)

    @tf.function()
    def process(img):
        if not augment:  # SAME_KWARGS: the notebook's eval scaling for both views
            view = img_scaling(tf.cast(img, dtype=tf.float32))
            return (view, view)
        view1 = simsiam_augmenter(img, blur=False)
        view1 = img_scaling(view1)
        view2 = simsiam_augmenter(img, blur=False)
        view2 = img_scaling(view2)
        return (view1, view2)

    return process


def original(
    dir: str, batch_size: int = BATCH_SIZE, augment: bool = True, epochs: int | None = None
) -> tf.data.Dataset:
    x_train = _x_train(dir)
    train_ds = tf.data.Dataset.from_tensor_slices(x_train)
    train_ds = train_ds.repeat(epochs)
    train_ds = train_ds.shuffle(1024)
    train_ds = train_ds.map(_process(augment), num_parallel_calls=tf.data.AUTOTUNE)
    train_ds = train_ds.batch(batch_size)
    return train_ds.prefetch(tf.data.AUTOTUNE)


# ---- the hand-tuned twin --------------------------------------------------------------------
def _batch_views(images, augment: bool, strengths):
    images = tf.cast(images, tf.float32)
    if not augment:
        view = img_scaling(images)
        return view, view
    n = tf.shape(images)[0]

    def uniform(lo, hi):
        return tf.random.uniform([n], lo, hi)

    def view():
        # crop: area 0.2-1.0 of the image, aspect ratio 3/4-4/3, resized to 32x32
        area = uniform(0.2, 1.0)
        ratio = tf.exp(uniform(np.log(3 / 4), np.log(4 / 3)))
        h = tf.minimum(tf.sqrt(area / ratio), 1.0)
        w = tf.minimum(tf.sqrt(area * ratio), 1.0)
        y0, x0 = uniform(0.0, 1.0) * (1 - h), uniform(0.0, 1.0) * (1 - w)
        boxes = tf.stack([y0, x0, y0 + h, x0 + w], axis=1)
        size = [CIFAR_IMG_SIZE, CIFAR_IMG_SIZE]
        x = tf.image.crop_and_resize(images, boxes, tf.range(n), size) / 255.0
        b, c, s, hue = strengths
        jitter = (uniform(0.0, 1.0) < 0.8)[:, None, None, None]
        y = x * uniform(max(1.0 - b, 0.0), 1.0 + b)[:, None, None, None]
        y = tf.clip_by_value(y, 0.0, 1.0)
        mean = tf.reduce_mean(y, axis=[1, 2, 3], keepdims=True)
        y = tf.clip_by_value((y - mean) * uniform(1 - c, 1 + c)[:, None, None, None] + mean, 0, 1)
        gray = tf.image.rgb_to_grayscale(y)
        y = tf.clip_by_value(gray + (y - gray) * uniform(1 - s, 1 + s)[:, None, None, None], 0, 1)
        hsv = tf.image.rgb_to_hsv(y)
        shifted = tf.math.floormod(hsv[..., 0] + uniform(-hue, hue)[:, None, None], 1.0)
        y = tf.image.hsv_to_rgb(tf.stack([shifted, hsv[..., 1], hsv[..., 2]], axis=-1))
        x = tf.where(jitter, tf.clip_by_value(y, 0.0, 1.0), x)
        gray = (uniform(0.0, 1.0) < 0.2)[:, None, None, None]
        x = tf.where(gray, tf.tile(tf.image.rgb_to_grayscale(x), [1, 1, 1, 3]), x)
        flip = (uniform(0.0, 1.0) < 0.5)[:, None, None, None]
        x = tf.where(flip, x[:, :, ::-1, :], x)
        return img_scaling(tf.clip_by_value(x * 255.0, 0.0, 255.0))

    return view(), view()


def tuned(
    dir: str, batch_size: int = BATCH_SIZE, augment: bool = True, epochs: int | None = None
) -> tf.data.Dataset:
    strengths = [float(np.random.uniform(0.0, 0.4)) for _ in range(3)]
    strengths.append(float(np.random.uniform(0.0, 0.1)))
    ds = tf.data.Dataset.from_tensor_slices(_x_train(dir)).repeat(epochs).shuffle(1024)
    ds = ds.batch(batch_size)
    ds = ds.map(lambda x: _batch_views(x, augment, strengths), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A stand-in for tfsim's ContrastiveModel (a ResNet18Sim backbone, projector and
    predictor trained on the two views): a small conv net mapping one view to the other, so
    that Keras' own train step runs on (view1, view2)."""
    inputs = keras.Input(shape=(CIFAR_IMG_SIZE, CIFAR_IMG_SIZE, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    m = keras.Model(inputs, keras.layers.Conv2D(3, 3, padding="same")(x))
    m.compile(optimizer="adam", loss="mse")
    return m
