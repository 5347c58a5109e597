"""User pipelines over TFRecord shards of Examples {x: float[32], y: float[1]}, written the
way tutorials write them, each beside its hand-tuned twin (`<name>_tuned`). Each is a
`make_dataset(data_dir, batch_size=..., **kwargs)`; kwargs from tfperf (training, split,
config, ...) are accepted and ignored. Their batched maps pass deterministic=False, as the
tf.data performance guide says, so that each case has the one flaw it is named after."""

from __future__ import annotations

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
FEATURES = {
    "x": tf.io.FixedLenFeature([32], tf.float32),
    "y": tf.io.FixedLenFeature([1], tf.float32),
}


def _files(data_dir: str) -> list[str]:
    return sorted(tf.io.gfile.glob(f"{data_dir}/*.tfrecord"))


def parse_one(record):
    example = tf.io.parse_single_example(record, FEATURES)
    return example["x"], example["y"]


def parse_batch(records):
    examples = tf.io.parse_example(records, FEATURES)
    return examples["x"], examples["y"]


def _parallel_read(data_dir: str, compression: str | None = None) -> tf.data.Dataset:
    files = tf.data.Dataset.from_tensor_slices(_files(data_dir))
    return files.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
        cycle_length=8,
        num_parallel_calls=AUTOTUNE,
        deterministic=False,
    )


# ---- per-example parse --------------------------------------------------------------------
def per_example_parse(data_dir, batch_size=64, **kwargs):
    dataset = tf.data.TFRecordDataset(_files(data_dir))
    dataset = dataset.map(parse_one)
    dataset = dataset.shuffle(1024)
    dataset = dataset.batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def per_example_parse_tuned(data_dir, batch_size=64, **kwargs):
    ds = _parallel_read(data_dir).shuffle(1024).batch(batch_size)
    ds = ds.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return ds.prefetch(AUTOTUNE)


# ---- many gzipped files read one after another ---------------------------------------------
def no_interleave(data_dir, batch_size=64, **kwargs):
    dataset = tf.data.TFRecordDataset(_files(data_dir), compression_type="GZIP")
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.prefetch(AUTOTUNE)


def no_interleave_tuned(data_dir, batch_size=64, **kwargs):
    ds = _parallel_read(data_dir, "GZIP").batch(batch_size)
    ds = ds.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return ds.prefetch(AUTOTUNE)


# ---- interleave without num_parallel_calls ---------------------------------------------------
def interleave_no_parallel(data_dir, batch_size=64, **kwargs):
    files = tf.data.Dataset.from_tensor_slices(_files(data_dir))
    dataset = files.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=8
    )
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.prefetch(AUTOTUNE)


interleave_no_parallel_tuned = no_interleave_tuned  # the same expert pipeline


# ---- shuffle after batch: the same batches every epoch, only their order changes -----------
def shuffle_after_batch(data_dir, batch_size=64, **kwargs):
    dataset = _parallel_read(data_dir)
    dataset = dataset.batch(batch_size)
    dataset = dataset.shuffle(64)
    dataset = dataset.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.prefetch(AUTOTUNE)


def shuffle_after_batch_tuned(data_dir, batch_size=64, **kwargs):
    ds = _parallel_read(data_dir).shuffle(4096).batch(batch_size)
    ds = ds.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return ds.prefetch(AUTOTUNE)


# ---- repeat before shuffle: epochs blur into each other ---------------------------------------
def repeat_before_shuffle(data_dir, batch_size=64, epochs=3, **kwargs):
    dataset = _parallel_read(data_dir)
    dataset = dataset.repeat(epochs)
    dataset = dataset.shuffle(2048)
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.prefetch(AUTOTUNE)


def repeat_before_shuffle_tuned(data_dir, batch_size=64, epochs=3, **kwargs):
    ds = _parallel_read(data_dir).shuffle(2048).repeat(epochs).batch(batch_size)
    ds = ds.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return ds.prefetch(AUTOTUNE)
