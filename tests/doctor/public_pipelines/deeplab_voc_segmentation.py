"""PASCAL VOC segmentation TFRecords (JPEG image, PNG class mask) through DeepLab's input.

Source: tensorflow/models research/deeplab/datasets/data_generator.py (Dataset with
num_readers=4 as research/deeplab/train.py builds it, is_training, should_shuffle,
should_repeat: TFRecordDataset(files, num_parallel_reads=4), map(_parse_function,
num_parallel_calls=4): parse_single_example, image and mask decoded with a tf.cond on
is_jpeg (decode_jpeg or decode_png); map(_preprocess_image, num_parallel_calls=4):
research/deeplab/input_preprocess.py preprocess_image_and_label (random scale from 0.5 to
2.0 in steps of 0.25, bilinear resize of the image and nearest of the mask with
align_corners, pad to the 513x513 crop with the mean pixel 127.5 and the ignore label 255,
random_crop of image and mask together, random left-right flip); shuffle(100) of the
preprocessed samples; repeat(); batch(8); prefetch(8)), with research/deeplab/core/
preprocess_utils.py's helpers ported to TF 2 (tf.compat.v1 resizes, tf.random). The
sample dict is turned into (image, label) for Keras.

Flaw: a shuffle of 100 preprocessed 513x513 float samples (a 100 MB buffer) after the
per-example work; two maps at a fixed parallelism of 4; the decode branches on the format;
the whole image is rescaled before the crop throws most of it away.
Twin: the serialized records shuffled (the same buffer size), one fused parallel map
(decode_jpeg/decode_png; the scale, pad and crop as one crop_and_resize of the 513x513
window per tensor, the window beyond the scaled image extrapolated with the pad values, the
same random draws; at scale 1 the pad and a slice, as the original), the flip; batch,
prefetch(AUTOTUNE).
Compared: with augment=False (scale 1, the crop at the top left, no flip) and one epoch,
ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, picture, reused, write_tfrecords

SOURCE = "tensorflow/models research/deeplab/datasets/data_generator.py (DeepLab on VOC 2012)"
FORMAT = "TFRecord of tf.train.Example (JPEG image, PNG segmentation mask)"
KIND = "segmentation"
FLAW = "parse and preprocess in two maps of 4, shuffle(100) of 513x513 samples after them"
TWIN = "shuffle records first, one parallel map: scale+pad+crop as one crop_and_resize"
BATCH_SIZE = 8
SAME_KWARGS = {"augment": False, "repeat": False}
# PASCAL VOC 2012 augmented training set (train_aug): 10,582 images of about 500x375.
FULL = 10_582
CROP = [513, 513]
MIN_SCALE, MAX_SCALE, SCALE_STEP = 0.5, 2.0, 0.25
IGNORE_LABEL = 255
NUM_CLASSES = 21
MEAN_PIXEL = [127.5, 127.5, 127.5]
_PROB_OF_FLIP = 0.5


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 16, FULL)
    rng = np.random.default_rng(25)

    key, pool = reused(size), {}

    def encoded(i):
        if size == "full":
            h, w = int(rng.integers(330, 500)), int(rng.integers(375, 500))
        else:
            h, w = int(rng.integers(90, 140)), int(rng.integers(100, 160))
        mask = np.zeros((h, w, 1), np.uint8)
        for _ in range(int(rng.integers(1, 4))):
            y0, x0 = int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2))
            y1, x1 = y0 + int(rng.integers(10, h // 2)), x0 + int(rng.integers(10, w // 2))
            mask[y0:y1, x0:x1] = int(rng.integers(1, NUM_CLASSES))
            mask[y0, x0:x1] = IGNORE_LABEL  # VOC's object borders
        jpeg = tf.io.encode_jpeg(picture(rng, h, w, tint=i)).numpy()
        return jpeg, tf.io.encode_png(mask).numpy(), h, w

    def examples():
        for i in range(n):
            if key(i) not in pool:
                pool[key(i)] = encoded(i)
            jpeg, png, h, w = pool[key(i)]
            yield {
                "image/encoded": [jpeg],
                "image/filename": [f"{i:06d}.jpg"],
                "image/format": ["jpeg"],
                "image/height": [h],
                "image/width": [w],
                "image/segmentation/class/encoded": [png],
                "image/segmentation/class/format": ["png"],
            }

    shards = 4
    write_tfrecords(str(Path(dir) / "train_aug-%05d-of-%05d.tfrecord"), examples(), shards)


# ---- research/deeplab/core/preprocess_utils.py ----------------------------------------------
def get_random_scale(min_scale_factor, max_scale_factor, step_size):
    if min_scale_factor == max_scale_factor:
        return tf.cast(min_scale_factor, tf.float32)
    if step_size == 0:
        return tf.random.uniform([1], minval=min_scale_factor, maxval=max_scale_factor)
    num_steps = int((max_scale_factor - min_scale_factor) / step_size + 1)
    scale_factors = tf.linspace(min_scale_factor, max_scale_factor, num_steps)
    shuffled_scale_factors = tf.random.shuffle(scale_factors)
    return shuffled_scale_factors[0]


def randomly_scale_image_and_label(image, label=None, scale=1.0):
    image_shape = tf.shape(image)
    new_dim = tf.cast(tf.cast([image_shape[0], image_shape[1]], tf.float32) * scale, tf.int32)
    image = tf.squeeze(
        tf.compat.v1.image.resize_bilinear(tf.expand_dims(image, 0), new_dim, align_corners=True),
        [0],
    )
    if label is not None:
        label = tf.squeeze(
            tf.compat.v1.image.resize_nearest_neighbor(
                tf.expand_dims(label, 0), new_dim, align_corners=True
            ),
            [0],
        )
    return image, label


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width, pad_value):
    image -= pad_value
    image_shape = tf.shape(image)
    height, width = image_shape[0], image_shape[1]
    after_padding_width = target_width - offset_width - width
    after_padding_height = target_height - offset_height - height
    paddings = tf.stack(
        [
            tf.stack([offset_height, after_padding_height]),
            tf.stack([offset_width, after_padding_width]),
            [0, 0],
        ]
    )
    padded = tf.pad(image, paddings)
    return padded + pad_value


def _crop(image, offset_height, offset_width, crop_height, crop_width):
    original_shape = tf.shape(image)
    cropped_shape = tf.stack([crop_height, crop_width, original_shape[2]])
    offsets = tf.cast(tf.stack([offset_height, offset_width, 0]), tf.int32)
    image = tf.slice(image, offsets, cropped_shape)
    return tf.reshape(image, cropped_shape)


def random_crop(image_list, crop_height, crop_width, random=True):
    image_shape = tf.shape(image_list[0])
    max_offset_height = tf.reshape(image_shape[0] - crop_height + 1, [])
    max_offset_width = tf.reshape(image_shape[1] - crop_width + 1, [])
    if random:
        offset_height = tf.random.uniform([], maxval=max_offset_height, dtype=tf.int32)
        offset_width = tf.random.uniform([], maxval=max_offset_width, dtype=tf.int32)
    else:  # SAME_KWARGS: the crop at the top left
        offset_height = offset_width = tf.constant(0)
    return [
        _crop(image, offset_height, offset_width, crop_height, crop_width) for image in image_list
    ]


def flip_dim(tensor_list, prob=0.5, dim=1):
    random_value = tf.random.uniform([])

    def flip():
        return [tf.reverse(t, [dim]) for t in tensor_list]

    is_flipped = tf.less_equal(random_value, prob)
    outputs = tf.cond(is_flipped, flip, lambda: tensor_list)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    outputs.append(is_flipped)
    return outputs


# ---- research/deeplab/input_preprocess.py (training) ----------------------------------------
def preprocess_image_and_label(image, label, crop_height, crop_width, augment=True):
    original_image = image
    processed_image = tf.cast(image, tf.float32)
    label = tf.cast(label, tf.int32)
    if augment:
        scale = get_random_scale(MIN_SCALE, MAX_SCALE, SCALE_STEP)
    else:
        scale = get_random_scale(1.0, 1.0, 0)
    processed_image, label = randomly_scale_image_and_label(processed_image, label, scale)
    processed_image.set_shape([None, None, 3])
    image_shape = tf.shape(processed_image)
    image_height, image_width = image_shape[0], image_shape[1]
    target_height = image_height + tf.maximum(crop_height - image_height, 0)
    target_width = image_width + tf.maximum(crop_width - image_width, 0)
    mean_pixel = tf.reshape(MEAN_PIXEL, [1, 1, 3])
    processed_image = pad_to_bounding_box(
        processed_image, 0, 0, target_height, target_width, mean_pixel
    )
    label = pad_to_bounding_box(label, 0, 0, target_height, target_width, IGNORE_LABEL)
    processed_image, label = random_crop([processed_image, label], crop_height, crop_width, augment)
    processed_image.set_shape([crop_height, crop_width, 3])
    label.set_shape([crop_height, crop_width, 1])
    if augment:
        processed_image, label, _ = flip_dim([processed_image, label], _PROB_OF_FLIP, dim=1)
    return original_image, processed_image, label


# ---- research/deeplab/datasets/data_generator.py --------------------------------------------
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/filename": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/format": tf.io.FixedLenFeature((), tf.string, default_value="jpeg"),
    "image/height": tf.io.FixedLenFeature((), tf.int64, default_value=0),
    "image/width": tf.io.FixedLenFeature((), tf.int64, default_value=0),
    "image/segmentation/class/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/segmentation/class/format": tf.io.FixedLenFeature((), tf.string, default_value="png"),
}


def _parse_function(example_proto):
    def _decode_image(content, channels):
        return tf.cond(
            tf.image.is_jpeg(content),
            lambda: tf.image.decode_jpeg(content, channels),
            lambda: tf.image.decode_png(content, channels),
        )

    parsed_features = tf.io.parse_single_example(example_proto, FEATURES)
    image = _decode_image(parsed_features["image/encoded"], channels=3)
    label = _decode_image(parsed_features["image/segmentation/class/encoded"], channels=1)
    sample = {
        "image": image,
        "image_name": parsed_features["image/filename"],
        "height": parsed_features["image/height"],
        "width": parsed_features["image/width"],
    }
    label.set_shape([None, None, 1])
    sample["labels_class"] = label
    return sample


def _preprocess_image(sample, augment=True):
    image, label = sample["image"], sample["labels_class"]
    _, image, label = preprocess_image_and_label(image, label, CROP[0], CROP[1], augment)
    sample["image"] = image
    sample["label"] = label
    sample.pop("labels_class", None)
    return sample


def _files(dir: str) -> list[str]:
    return sorted(str(p) for p in Path(dir).glob("train_aug-*.tfrecord"))


def _for_keras(sample):
    return sample["image"], sample["label"]


def original(
    dir: str, batch_size: int = BATCH_SIZE, augment: bool = True, repeat: bool = True
) -> tf.data.Dataset:
    num_readers = 4
    dataset = (
        tf.data.TFRecordDataset(_files(dir), num_parallel_reads=num_readers)
        .map(_parse_function, num_parallel_calls=num_readers)
        .map(lambda s: _preprocess_image(s, augment), num_parallel_calls=num_readers)
    )
    dataset = dataset.shuffle(buffer_size=100)
    dataset = dataset.repeat() if repeat else dataset.repeat(1)
    dataset = dataset.batch(batch_size).prefetch(batch_size)
    return dataset.map(_for_keras)


# ---- the hand-tuned twin --------------------------------------------------------------------
def _crop_scaled(image, label, augment=True):
    """preprocess_image_and_label's scale, pad and crop in one crop_and_resize per tensor:
    only the 513x513 window is interpolated (with align_corners' sampling grid), and the
    window's part beyond the scaled image takes the pad value (the mean pixel, the ignore
    label) as extrapolation. The scale and the offsets are drawn as the original draws
    them; the flip follows."""
    shape = tf.shape(image)
    h, w = shape[0], shape[1]
    scale = get_random_scale(MIN_SCALE, MAX_SCALE, SCALE_STEP) if augment else 1.0
    hs = tf.cast(tf.cast(h, tf.float32) * scale, tf.int32)
    ws = tf.cast(tf.cast(w, tf.float32) * scale, tf.int32)
    if augment:
        oy = tf.random.uniform([], maxval=tf.maximum(hs, CROP[0]) - CROP[0] + 1, dtype=tf.int32)
        ox = tf.random.uniform([], maxval=tf.maximum(ws, CROP[1]) - CROP[1] + 1, dtype=tf.int32)
    else:
        oy = ox = tf.constant(0)
    # scaled pixel p samples the source at p * (h - 1) / (hs - 1) (align_corners); the
    # source gets one row and column of the pad value, so that rounding just past its last
    # pixel still reads it (crop_and_resize extrapolates beyond h - 1 exactly)
    fy = tf.cast(h - 1, tf.float32) / tf.cast(tf.maximum(hs - 1, 1), tf.float32)
    fx = tf.cast(w - 1, tf.float32) / tf.cast(tf.maximum(ws - 1, 1), tf.float32)
    oy, ox = tf.cast(oy, tf.float32), tf.cast(ox, tf.float32)
    hp, wp = tf.cast(h, tf.float32), tf.cast(w, tf.float32)  # the padded source's last index
    box = tf.stack(
        [oy * fy / hp, ox * fx / wp, (oy + CROP[0] - 1) * fy / hp, (ox + CROP[1] - 1) * fx / wp]
    )[None]

    def crop(t, method, pad):
        t = tf.pad(tf.cast(t, tf.float32) - pad, [[0, 1], [0, 1], [0, 0]]) + pad
        return tf.image.crop_and_resize(
            t[None], box, [0], CROP, method=method, extrapolation_value=pad
        )[0]

    def unscaled(t, pad):  # scale 1: no interpolation, the pad and a slice
        t = tf.cast(t, tf.float32)
        th, tw = tf.maximum(h, CROP[0]), tf.maximum(w, CROP[1])
        t = pad_to_bounding_box(t, 0, 0, th, tw, pad)
        return _crop(t, tf.cast(oy, tf.int32), tf.cast(ox, tf.int32), CROP[0], CROP[1])

    same = tf.logical_and(tf.equal(hs, h), tf.equal(ws, w))
    image = tf.cond(
        same,
        lambda: unscaled(image, MEAN_PIXEL[0]),
        lambda: crop(image, "bilinear", MEAN_PIXEL[0]),
    )
    label = tf.cond(
        same,
        lambda: unscaled(label, float(IGNORE_LABEL)),
        lambda: crop(label, "nearest", float(IGNORE_LABEL)),
    )
    image.set_shape(CROP + [3])
    label = tf.cast(label, tf.int32)
    label.set_shape(CROP + [1])
    if augment:
        image, label, _ = flip_dim([image, label], _PROB_OF_FLIP, dim=1)
    return image, label


def tuned(
    dir: str, batch_size: int = BATCH_SIZE, augment: bool = True, repeat: bool = True
) -> tf.data.Dataset:
    def parse_and_preprocess(record):
        f = tf.io.parse_single_example(record, FEATURES)
        image = tf.image.decode_jpeg(f["image/encoded"], channels=3)
        label = tf.image.decode_png(f["image/segmentation/class/encoded"], channels=1)
        return _crop_scaled(image, label, augment)

    ds = tf.data.TFRecordDataset(_files(dir), num_parallel_reads=tf.data.AUTOTUNE)
    ds = ds.shuffle(100).repeat(None if repeat else 1)
    ds = ds.map(parse_and_preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A small stand-in for DeepLab v3+: a strided conv encoder, per-pixel logits of the 21
    classes upsampled to the crop, a cross-entropy that ignores label 255."""
    inputs = keras.Input(shape=(CROP[0], CROP[1], 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    x = keras.layers.Conv2D(16, 3, strides=4, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(NUM_CLASSES, 1)(x)
    logits = keras.layers.Resizing(CROP[0], CROP[1], interpolation="bilinear")(x)
    m = keras.Model(inputs, logits)
    m.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255),
    )
    return m
