"""The TFRecord tutorial's four features, parsed one record at a time.

Source: tensorflow/docs site/en/tutorials/load_data/tfrecord.ipynb ("TFRecord and
tf.train.Example": test.tfrecord written with serialize_example (feature0 bool, feature1
int 0-4, feature2 the matching animal name, feature3 a float), read with
TFRecordDataset(filenames).map(_parse_function) where _parse_function is
tf.io.parse_single_example with feature_description). The tutorial stops at the parsed
dataset; to train, features and label are split (feature0 is the label) and batched as
the Keras tutorials do.

Flaw: parse_single_example per record in a sequential map, no prefetch.
Twin: batch the serialized records, one parse_example per batch in a parallel map,
prefetch.
Compared: as published (deterministic), one epoch, in any order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = (
    "tensorflow/docs site/en/tutorials/load_data/tfrecord.ipynb (TFRecord and tf.train.Example)"
)
FORMAT = "TFRecord of tf.train.Example (int64, bytes, float features)"
FLAW = "parse_single_example per record, sequential map, no prefetch"
TWIN = "batch, parse_example per batch (parallel map), prefetch"
BATCH_SIZE = 64
ANIMALS = [b"cat", b"dog", b"chicken", b"horse", b"goat"]

feature_description = {
    "feature0": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    "feature1": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    "feature2": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "feature3": tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
}


def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _float_feature(value):
    return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))


# The tutorial's n_observations (int(1e4)).
FULL = 10000


def make_data(dir: str, size: str = "small") -> None:
    n_observations = count(size, 1000, FULL)
    rng = np.random.default_rng(4)
    feature0 = rng.choice([False, True], n_observations)
    feature1 = rng.integers(0, 5, n_observations)
    feature2 = np.array(ANIMALS)[feature1]
    feature3 = rng.standard_normal(n_observations)
    with tf.io.TFRecordWriter(str(Path(dir) / "test.tfrecord")) as writer:
        for i in range(n_observations):
            feature = {
                "feature0": _int64_feature(int(feature0[i])),
                "feature1": _int64_feature(int(feature1[i])),
                "feature2": _bytes_feature(feature2[i]),
                "feature3": _float_feature(float(feature3[i])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def _split(parsed):
    features = {k: parsed[k] for k in ("feature1", "feature2", "feature3")}
    return features, parsed["feature0"]


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    filenames = [str(Path(dir) / "test.tfrecord")]
    raw_dataset = tf.data.TFRecordDataset(filenames)

    def _parse_function(example_proto):
        return tf.io.parse_single_example(example_proto, feature_description)

    parsed_dataset = raw_dataset.map(_parse_function)
    return parsed_dataset.map(_split).batch(batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    ds = tf.data.TFRecordDataset([str(Path(dir) / "test.tfrecord")]).batch(batch_size)
    ds = ds.map(
        lambda protos: _split(tf.io.parse_example(protos, feature_description)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    inputs = {
        "feature1": keras.Input((), name="feature1", dtype="int64"),
        "feature2": keras.Input((), name="feature2", dtype="string"),
        "feature3": keras.Input((), name="feature3", dtype="float32"),
    }
    f1 = keras.layers.CategoryEncoding(num_tokens=5, output_mode="one_hot")(inputs["feature1"])
    f2 = keras.layers.StringLookup(vocabulary=[a.decode() for a in ANIMALS], output_mode="one_hot")(
        inputs["feature2"]
    )
    f3 = keras.layers.Reshape((1,))(inputs["feature3"])
    x = keras.layers.Concatenate()([f1, f2, f3])
    x = keras.layers.Dense(16, activation="relu")(x)
    m = keras.Model(inputs, keras.layers.Dense(1)(x))
    m.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
    return m
