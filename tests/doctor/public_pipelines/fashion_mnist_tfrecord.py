"""Fashion MNIST as sharded TFRecords of serialized tensors, cached before parsing.

Source: ageron/handson-ml3 13_loading_and_preprocessing_data.ipynb (Hands-On Machine
Learning, 3rd ed., chapter 13, exercise 9: write_tfrecords into 10 shards with
create_example (tf.io.serialize_tensor of the 28x28 uint8 image, int64 label);
mnist_dataset: TFRecordDataset(filepaths, num_parallel_reads=5), cache(),
shuffle(60000), map(preprocess, num_parallel_calls=5) (parse_single_example, parse_tensor,
reshape), batch(32), prefetch(1); the exercise's Normalization + Dense model).

Flaw: the cache holds the serialized records, so every epoch parses every example again,
one at a time, on 5 threads; prefetch(1).
Twin: parse once (batched parse_example, parse_tensor per image in a parallel map), cache
the images, shuffle, batch, prefetch(AUTOTUNE).
Compared: as published, one epoch, ignoring order.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = (
    "ageron/handson-ml3 13_loading_and_preprocessing_data.ipynb "
    "(Hands-On ML 3rd ed., ch. 13: Loading and Preprocessing Data)"
)
FORMAT = "TFRecord shards of tf.train.Example (serialized uint8 tensors)"
FLAW = "cache of serialized records: per-example parse_single_example + parse_tensor every epoch"
TWIN = "parse once, cache images, shuffle, batch, prefetch"
BATCH_SIZE = 32
N_SHARDS = 10

feature_descriptions = {
    "image": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
}


def _paths(dir: str) -> list[str]:
    name = str(Path(dir) / "my_fashion_mnist.train")
    return [f"{name}.tfrecord-{i:05d}-of-{N_SHARDS:05d}" for i in range(N_SHARDS)]


# Fashion-MNIST's training images.
FULL = 60000


def make_data(dir: str, size: str = "small") -> None:
    from tensorflow.train import BytesList, Example, Feature, Features, Int64List

    rng = np.random.default_rng(5)
    n = count(size, 600, FULL)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n)
    with ExitStack() as stack:
        writers = [stack.enter_context(tf.io.TFRecordWriter(p)) for p in _paths(dir)]
        for index, (image, label) in enumerate(zip(images, labels, strict=True)):
            data = tf.io.serialize_tensor(image).numpy()
            example = Example(
                features=Features(
                    feature={
                        "image": Feature(bytes_list=BytesList(value=[data])),
                        "label": Feature(int64_list=Int64List(value=[int(label)])),
                    }
                )
            )
            writers[index % N_SHARDS].write(example.SerializeToString())


def preprocess(tfrecord):
    example = tf.io.parse_single_example(tfrecord, feature_descriptions)
    image = tf.io.parse_tensor(example["image"], out_type=tf.uint8)
    image = tf.reshape(image, shape=[28, 28])
    return image, example["label"]


def mnist_dataset(
    filepaths,
    n_read_threads=5,
    shuffle_buffer_size=None,
    n_parse_threads=5,
    batch_size=32,
    cache=True,
):
    dataset = tf.data.TFRecordDataset(filepaths, num_parallel_reads=n_read_threads)
    if cache:
        dataset = dataset.cache()
    if shuffle_buffer_size:
        dataset = dataset.shuffle(shuffle_buffer_size)
    dataset = dataset.map(preprocess, num_parallel_calls=n_parse_threads)
    dataset = dataset.batch(batch_size)
    return dataset.prefetch(1)


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    return mnist_dataset(_paths(dir), shuffle_buffer_size=60000, batch_size=batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    AUTOTUNE = tf.data.AUTOTUNE

    def parse(records):
        examples = tf.io.parse_example(records, feature_descriptions)
        images = tf.map_fn(
            lambda s: tf.io.parse_tensor(s, out_type=tf.uint8),
            examples["image"],
            fn_output_signature=tf.TensorSpec([28, 28], tf.uint8),
        )
        return images, examples["label"]

    ds = tf.data.TFRecordDataset(_paths(dir), num_parallel_reads=AUTOTUNE).batch(256)
    ds = ds.map(parse, num_parallel_calls=AUTOTUNE).unbatch().cache()
    return ds.shuffle(60000).batch(batch_size).prefetch(AUTOTUNE)


def model() -> keras.Model:
    # Normalization.adapt on sample images in the book; fixed statistics of uniform pixels.
    standardization = keras.layers.Normalization(mean=127.5, variance=5461.0)
    m = keras.Sequential(
        [
            keras.Input((28, 28)),
            standardization,
            keras.layers.Flatten(),
            keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    m.compile(loss="sparse_categorical_crossentropy", optimizer="nadam", metrics=["accuracy"])
    return m
