"""Small real pipelines for the tfperf.testing tests: a TFRecord file of Examples and the two
ways users read it (per-example parse, and batch then parse)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

SPEC = {
    "x": tf.io.FixedLenFeature([2], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.string),
}


def write_examples(path: Path, rows: list[tuple[list[float], bytes]]) -> Path:
    """A TFRecord file with one Example per (x, label) row."""
    with tf.io.TFRecordWriter(str(path)) as w:
        for x, label in rows:
            feature = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[label])),
            }
            w.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return path


def rows(n: int) -> list[tuple[list[float], bytes]]:
    return [([float(i), i / 4], f"cat{i}".encode()) for i in range(n)]


def per_example(path: Path, batch: int = 4) -> tf.data.Dataset:
    """How users start: parse each record, then batch."""
    ds = tf.data.TFRecordDataset(str(path))
    return ds.map(lambda r: tf.io.parse_single_example(r, SPEC)).batch(batch)


def batch_then_parse(path: Path, batch: int = 5, seed: int | None = 1) -> tf.data.Dataset:
    """The tuned twin: shuffled, batched records parsed in one parse_example per batch."""
    ds = tf.data.TFRecordDataset(str(path)).shuffle(64, seed=seed).batch(batch)
    return ds.map(lambda r: tf.io.parse_example(r, SPEC), num_parallel_calls=tf.data.AUTOTUNE)
