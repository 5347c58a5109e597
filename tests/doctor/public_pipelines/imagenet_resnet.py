"""ImageNet-style TFRecords of JPEGs through the ResNet input_fn of tensorflow/models.

Source: tensorflow/models official/legacy/image_classification/resnet/imagenet_preprocessing.py
(input_fn with filenames=: from_tensor_slices(filenames), shuffle the files,
interleave(TFRecordDataset, cycle_length=10, num_parallel_calls=AUTOTUNE); then
process_record_dataset: shuffle(_SHUFFLE_BUFFER=10000), repeat(), map(parse_record,
num_parallel_calls=AUTOTUNE), batch, prefetch(AUTOTUNE); parse_record: parse_single_example
of the Example (encoded JPEG, label, bbox), _decode_crop_and_flip
(sample_distorted_bounding_box + decode_and_crop_jpeg + random_flip_left_right), resize to
224x224, mean subtraction; label - 1 as float32 [1]). Ported as published; the 1,024 files
become 4 stand-in shards.

Flaw: parse_single_example per record (the Example also carries bbox lists and a text);
otherwise already tuned (parallel interleave, parallel map, prefetch).
Twin: batch the records and parse them with one parse_example per batch, then decode per
example in a parallel map; options.deterministic=False.
Compared: with augment=False (the crop and flip are random: both use the eval
preprocessing, decode + aspect-preserving resize + central crop, inside the training
pipeline), the first epoch (LIMIT examples; it repeats forever), ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, picture, reused

SOURCE = (
    "tensorflow/models official/legacy/image_classification/resnet/imagenet_preprocessing.py "
    "(ResNet ImageNet input_fn)"
)
FORMAT = "TFRecord shards of tf.train.Example (JPEG, label, bounding boxes)"
FLAW = "parse_single_example per record before the per-example JPEG decode"
TWIN = "batched parse_example, then parallel decode per example, non-deterministic"
BATCH_SIZE = 32
SAME_KWARGS = {"augment": False}
LIMIT = 64  # the stand-in's records: one epoch

DEFAULT_IMAGE_SIZE = 224
NUM_CHANNELS = 3
NUM_CLASSES = 1001
_SHUFFLE_BUFFER = 10000
_R_MEAN, _G_MEAN, _B_MEAN = 123.68, 116.78, 103.94
CHANNEL_MEANS = [_R_MEAN, _G_MEAN, _B_MEAN]
_RESIZE_MIN = 256


# ImageNet's training set is 1.28M JPEGs of about 400x350 pixels in 1,024 shards; "full"
# writes 20,000 such JPEGs in 16 shards (a 64th: writing all of them would take hours).
FULL = 20_000


def _filenames(dir: str) -> list[str]:
    paths = sorted(Path(dir).glob("train-*-of-*"))
    if paths:
        return [str(p) for p in paths]
    return [str(Path(dir) / f"train-{i:05d}-of-00004") for i in range(4)]


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(6)
    n = 0
    shards = count(size, 4, 16)
    key, pool = reused(size), {}
    paths = [str(Path(dir) / f"train-{i:05d}-of-{shards:05d}") for i in range(shards)]
    for path in paths:
        with tf.io.TFRecordWriter(path) as w:
            for _ in range(count(size, LIMIT, FULL) // shards):
                if key(n) not in pool:
                    if size == "full":
                        h, w_ = int(rng.integers(300, 400)), int(rng.integers(350, 500))
                    else:
                        h, w_ = int(rng.integers(100, 140)), int(rng.integers(120, 160))
                    pool[key(n)] = tf.io.encode_jpeg(picture(rng, h, w_, tint=n)).numpy()
                jpeg = pool[key(n)]
                box = sorted(rng.uniform(0, 1, 2)), sorted(rng.uniform(0, 1, 2))
                f = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[1 + n % 10])
                    ),
                    "image/class/text": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[b"class %d" % (n % 10)])
                    ),
                    "image/object/bbox/ymin": _floats([box[0][0]]),
                    "image/object/bbox/ymax": _floats([box[0][1]]),
                    "image/object/bbox/xmin": _floats([box[1][0]]),
                    "image/object/bbox/xmax": _floats([box[1][1]]),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
                n += 1


def _floats(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _feature_map():
    feature_map = {
        "image/encoded": tf.io.FixedLenFeature([], dtype=tf.string, default_value=""),
        "image/class/label": tf.io.FixedLenFeature([], dtype=tf.int64, default_value=-1),
        "image/class/text": tf.io.FixedLenFeature([], dtype=tf.string, default_value=""),
    }
    sparse_float32 = tf.io.VarLenFeature(dtype=tf.float32)
    feature_map.update(
        {
            k: sparse_float32
            for k in [
                "image/object/bbox/xmin",
                "image/object/bbox/ymin",
                "image/object/bbox/xmax",
                "image/object/bbox/ymax",
            ]
        }
    )
    return feature_map


def _bbox(features):
    xmin = tf.expand_dims(features["image/object/bbox/xmin"].values, 0)
    ymin = tf.expand_dims(features["image/object/bbox/ymin"].values, 0)
    xmax = tf.expand_dims(features["image/object/bbox/xmax"].values, 0)
    ymax = tf.expand_dims(features["image/object/bbox/ymax"].values, 0)
    bbox = tf.concat([ymin, xmin, ymax, xmax], 0)
    bbox = tf.expand_dims(bbox, 0)
    return tf.transpose(a=bbox, perm=[0, 2, 1])


def parse_example_proto(example_serialized):
    features = tf.io.parse_single_example(serialized=example_serialized, features=_feature_map())
    label = tf.cast(features["image/class/label"], dtype=tf.int32)
    return features["image/encoded"], label, _bbox(features)


def _decode_crop_and_flip(image_buffer, bbox, num_channels):
    sample_distorted_bounding_box = tf.image.sample_distorted_bounding_box(
        tf.image.extract_jpeg_shape(image_buffer),
        bounding_boxes=bbox,
        min_object_covered=0.1,
        aspect_ratio_range=[0.75, 1.33],
        area_range=[0.05, 1.0],
        max_attempts=100,
        use_image_if_no_bounding_boxes=True,
    )
    bbox_begin, bbox_size, _ = sample_distorted_bounding_box
    offset_y, offset_x, _ = tf.unstack(bbox_begin)
    target_height, target_width, _ = tf.unstack(bbox_size)
    crop_window = tf.stack([offset_y, offset_x, target_height, target_width])
    cropped = tf.image.decode_and_crop_jpeg(image_buffer, crop_window, channels=num_channels)
    return tf.image.random_flip_left_right(cropped)


def _central_crop(image, crop_height, crop_width):
    shape = tf.shape(input=image)
    height, width = shape[0], shape[1]
    crop_top = (height - crop_height) // 2
    crop_left = (width - crop_width) // 2
    return tf.slice(image, [crop_top, crop_left, 0], [crop_height, crop_width, -1])


def _mean_image_subtraction(image, means, num_channels):
    means = tf.broadcast_to(means, tf.shape(image))
    return image - means


def _smallest_size_at_least(height, width, resize_min):
    resize_min = tf.cast(resize_min, tf.float32)
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    smaller_dim = tf.minimum(height, width)
    scale_ratio = resize_min / smaller_dim
    new_height = tf.cast(height * scale_ratio, tf.int32)
    new_width = tf.cast(width * scale_ratio, tf.int32)
    return new_height, new_width


def _resize_image(image, height, width):
    return tf.compat.v1.image.resize(
        image, [height, width], method=tf.image.ResizeMethod.BILINEAR, align_corners=False
    )


def _aspect_preserving_resize(image, resize_min):
    shape = tf.shape(input=image)
    new_height, new_width = _smallest_size_at_least(shape[0], shape[1], resize_min)
    return _resize_image(image, new_height, new_width)


def preprocess_image(image_buffer, bbox, output_height, output_width, num_channels, is_training):
    if is_training:
        image = _decode_crop_and_flip(image_buffer, bbox, num_channels)
        image = _resize_image(image, output_height, output_width)
    else:
        image = tf.image.decode_jpeg(image_buffer, channels=num_channels)
        image = _aspect_preserving_resize(image, _RESIZE_MIN)
        image = _central_crop(image, output_height, output_width)
    image.set_shape([output_height, output_width, num_channels])
    return _mean_image_subtraction(image, CHANNEL_MEANS, num_channels)


def _finish(image_buffer, label, bbox, is_training, dtype):
    image = preprocess_image(
        image_buffer=image_buffer,
        bbox=bbox,
        output_height=DEFAULT_IMAGE_SIZE,
        output_width=DEFAULT_IMAGE_SIZE,
        num_channels=NUM_CHANNELS,
        is_training=is_training,
    )
    image = tf.cast(image, dtype)
    label = tf.cast(tf.cast(tf.reshape(label, shape=[1]), dtype=tf.int32) - 1, dtype=tf.float32)
    return image, label


def parse_record(raw_record, is_training, dtype):
    image_buffer, label, bbox = parse_example_proto(raw_record)
    return _finish(image_buffer, label, bbox, is_training, dtype)


def original(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    # input_fn(is_training=True, data_dir=dir, batch_size=..., filenames=...)
    dataset = tf.data.Dataset.from_tensor_slices(_filenames(dir))
    dataset = dataset.shuffle(buffer_size=1024)
    dataset = dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=10, num_parallel_calls=tf.data.experimental.AUTOTUNE
    )
    # process_record_dataset(...)
    dataset = dataset.shuffle(buffer_size=_SHUFFLE_BUFFER)
    dataset = dataset.repeat()
    dataset = dataset.map(
        lambda value: parse_record(value, augment, tf.float32),
        num_parallel_calls=tf.data.experimental.AUTOTUNE,
    )
    dataset = dataset.batch(batch_size, drop_remainder=False)
    dataset = dataset.prefetch(buffer_size=tf.data.experimental.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_slack = False
    return dataset.with_options(options)


def tuned(dir: str, batch_size: int = BATCH_SIZE, augment: bool = True) -> tf.data.Dataset:
    AUTOTUNE = tf.data.AUTOTUNE

    def parse_batch(records):
        features = tf.io.parse_example(records, _feature_map())
        return (
            features["image/encoded"],
            tf.cast(features["image/class/label"], tf.int32),
            {k: features[k] for k in features if k.startswith("image/object")},
        )

    def decode(image_buffer, label, boxes):
        return _finish(image_buffer, label, _bbox(boxes), augment, tf.float32)

    files = tf.data.Dataset.from_tensor_slices(_filenames(dir)).shuffle(1024)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=10, num_parallel_calls=AUTOTUNE)
    ds = ds.shuffle(_SHUFFLE_BUFFER).repeat().batch(256)
    ds = ds.map(parse_batch, num_parallel_calls=AUTOTUNE).unbatch()
    ds = ds.map(decode, num_parallel_calls=AUTOTUNE).batch(batch_size).prefetch(AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = False
    return ds.with_options(options)


def model() -> keras.Model:
    """The ResNet's input and 1001-way softmax with a tiny body between."""
    m = keras.Sequential(
        [
            keras.Input((DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE, 3)),
            keras.layers.Conv2D(8, 7, strides=4, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(NUM_CLASSES, activation="softmax"),
        ]
    )
    m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m
