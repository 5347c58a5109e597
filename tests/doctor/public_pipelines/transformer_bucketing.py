"""WMT token-id TFRecords grouped into length buckets, as the TF Model Garden Transformer reads.

Source: tensorflow/models official/legacy/transformer/data_pipeline.py (train_input_fn ->
_read_and_batch_from_files: list_files(shuffle=True), interleave(TFRecordDataset,
cycle_length=max_io_parallelism, num_parallel_calls=AUTOTUNE) made non-deterministic,
map(_parse_example: parse_single_example of two VarLenFeature(int64), sparse.to_dense) with
num_parallel_calls=AUTOTUNE, filter(_filter_max_length), _batch_examples: group_by_window
keyed by the length bucket (boundaries from 8, scaled by 1.1 up to max_length), each
bucket padded_batch'ed to batch_size // bucket_max examples, batch_size counting tokens;
repeat(repeat_dataset); prefetch(AUTOTUNE)) and official/legacy/transformer/transformer_main.py
(map_data_for_transformer_fn: the Keras model takes (inputs, targets)). Here the model's loss
is compiled, so the targets are also the labels: `((inputs, targets), targets)`.

Flaw: each record parsed alone (parse_single_example of two VarLen features, two
sparse-to-dense); each example then goes through group_by_window's key function one at a
time.
Twin: records batched 4096 at a time, one parse_example into ragged tensors, the length
filter, the same buckets and per-bucket batch sizes computed for the whole chunk (a stable
sort by bucket, ragged row splits every bucket_batch_size), then padded in a parallel map;
prefetch. A bucket's last batch of a chunk may be smaller than group_by_window's.
Compared: one epoch (repeat=1), ignoring order and padding (the buckets pad per batch).
Batch size: tokens per batch (the Model Garden's base setting on GPU is 4096), as the
source counts it.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, write_tfrecords

SOURCE = "tensorflow/models official/legacy/transformer/data_pipeline.py (Transformer WMT input)"
FORMAT = "TFRecord shards of tf.train.Example (variable-length token ids)"
KIND = "bucketing"
FLAW = "parse_single_example per record, group_by_window per example"
TWIN = "batched parse_example into ragged, buckets cut per chunk of 4096, parallel padding"
BATCH_SIZE = 4096  # tokens per batch
SAME_KWARGS = {"repeat": 1}
# WMT'14 en-de has 4.5M sentence pairs in 100 shards; "full" writes 400,000 of them (10
# shards) so that writing them takes about a minute.
FULL = 400_000
VOCAB = 32768
MAX_LENGTH = 256
_READ_RECORD_BUFFER = 8 * 1000 * 1000
_MIN_BOUNDARY = 8
_BOUNDARY_SCALE = 1.1


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 1200, FULL)
    rng = np.random.default_rng(21)

    def examples():
        for _ in range(n):
            a = int(np.clip(rng.lognormal(3.2, 0.6), 2, 320))
            b = int(np.clip(a * rng.uniform(0.8, 1.25), 2, 320))
            yield {
                "inputs": rng.integers(2, VOCAB, a).tolist() + [1],
                "targets": rng.integers(2, VOCAB, b).tolist() + [1],
            }

    shards = 10 if size == "full" else 4
    write_tfrecords(str(Path(dir) / "wmt32k-train-%05d-of-%05d"), examples(), shards)


# ---- the published pipeline -----------------------------------------------------------------
def _load_records(filename):
    return tf.data.TFRecordDataset(filename, buffer_size=_READ_RECORD_BUFFER)


def _parse_example(serialized_example):
    data_fields = {
        "inputs": tf.io.VarLenFeature(tf.int64),
        "targets": tf.io.VarLenFeature(tf.int64),
    }
    parsed = tf.io.parse_single_example(serialized_example, data_fields)
    inputs = tf.sparse.to_dense(parsed["inputs"])
    targets = tf.sparse.to_dense(parsed["targets"])
    return inputs, targets


def _filter_max_length(example, max_length=256):
    return tf.logical_and(tf.size(example[0]) <= max_length, tf.size(example[1]) <= max_length)


def _get_example_length(example):
    return tf.maximum(tf.shape(example[0])[0], tf.shape(example[1])[0])


def _create_min_max_boundaries(
    max_length, min_boundary=_MIN_BOUNDARY, boundary_scale=_BOUNDARY_SCALE
):
    bucket_boundaries = []
    x = min_boundary
    while x < max_length:
        bucket_boundaries.append(x)
        x = max(x + 1, int(x * boundary_scale))
    buckets_min = [0] + bucket_boundaries
    buckets_max = bucket_boundaries + [max_length + 1]
    return buckets_min, buckets_max


def _batch_examples(dataset, batch_size, max_length):
    buckets_min, buckets_max = _create_min_max_boundaries(max_length)
    bucket_batch_sizes = [int(batch_size) // x for x in buckets_max]
    bucket_batch_sizes = tf.constant(bucket_batch_sizes, dtype=tf.int64)

    def example_to_bucket_id(example_input, example_target):
        seq_length = _get_example_length((example_input, example_target))
        conditions_c = tf.logical_and(
            tf.less_equal(buckets_min, seq_length), tf.less(seq_length, buckets_max)
        )
        bucket_id = tf.reduce_min(tf.where(conditions_c))
        return bucket_id

    def window_size_fn(bucket_id):
        return bucket_batch_sizes[bucket_id]

    def batching_fn(bucket_id, grouped_dataset):
        bucket_batch_size = window_size_fn(bucket_id)
        return grouped_dataset.padded_batch(bucket_batch_size, ([None], [None]))

    return dataset.group_by_window(
        key_func=example_to_bucket_id,
        reduce_func=batching_fn,
        window_size=None,
        window_size_func=window_size_fn,
    )


def original(dir: str, batch_size: int = BATCH_SIZE, repeat: int | None = None) -> tf.data.Dataset:
    file_pattern = str(Path(dir) / "*train*")
    max_io_parallelism = 8  # the Model Garden's default num_parallel_calls
    dataset = tf.data.Dataset.list_files(file_pattern, shuffle=True)
    options = tf.data.Options()
    options.deterministic = False
    dataset = dataset.interleave(
        _load_records, cycle_length=max_io_parallelism, num_parallel_calls=tf.data.AUTOTUNE
    ).with_options(options)
    dataset = dataset.map(_parse_example, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.filter(lambda x, y: _filter_max_length((x, y), MAX_LENGTH))
    dataset = _batch_examples(dataset, batch_size, MAX_LENGTH)
    dataset = dataset.repeat(repeat)
    dataset = dataset.prefetch(buffer_size=tf.data.AUTOTUNE)
    # transformer_main's map_data_for_transformer_fn, with the targets as labels.
    return dataset.map(lambda x, y: ((x, y), y))


# ---- the hand-tuned twin --------------------------------------------------------------------
CHUNK = 4096  # examples bucketed at once


def _bucketed_chunk(x, y, batch_size):
    """One chunk of ragged examples cut into padded batches of one length bucket each (the
    same buckets and batch sizes as _batch_examples; a bucket's last batch in a chunk may be
    smaller), all with vectorized ops."""
    buckets_min, buckets_max = _create_min_max_boundaries(MAX_LENGTH)
    sizes = tf.constant([int(batch_size) // m for m in buckets_max], tf.int64)
    length = tf.cast(tf.maximum(x.row_lengths(), y.row_lengths()), tf.int64)
    fits = tf.logical_and(
        tf.less_equal(tf.constant(buckets_min, tf.int64)[None, :], length[:, None]),
        tf.less(length[:, None], tf.constant(buckets_max, tf.int64)[None, :]),
    )
    bucket = tf.argmax(tf.cast(fits, tf.int32), axis=1)  # the first bucket that fits
    order = tf.argsort(bucket, stable=True)
    bucket = tf.gather(bucket, order)
    x, y = tf.gather(x, order), tf.gather(y, order)
    n = tf.size(bucket, out_type=tf.int64)
    first = tf.searchsorted(bucket, bucket, side="left")  # where each bucket starts
    position = tf.range(n) - tf.cast(first, tf.int64)
    key = bucket * (CHUNK + 1) + position // tf.gather(sizes, bucket)
    starts = tf.concat([[True], key[1:] != key[:-1]], 0)
    splits = tf.concat([tf.where(starts)[:, 0], [n]], 0)
    batches_x = tf.RaggedTensor.from_row_splits(x, splits)
    batches_y = tf.RaggedTensor.from_row_splits(y, splits)
    return tf.data.Dataset.from_tensor_slices((batches_x, batches_y))


def tuned(dir: str, batch_size: int = BATCH_SIZE, repeat: int | None = None) -> tf.data.Dataset:
    spec = {
        "inputs": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64),
        "targets": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64),
    }

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        x, y = parsed["inputs"], parsed["targets"]
        keep = (x.row_lengths() <= MAX_LENGTH) & (y.row_lengths() <= MAX_LENGTH)
        return tf.ragged.boolean_mask(x, keep), tf.ragged.boolean_mask(y, keep)

    def pad(x, y):
        x, y = x.to_tensor(), y.to_tensor()
        return (x, y), y

    files = tf.data.Dataset.list_files(str(Path(dir) / "*train*"), shuffle=True)
    options = tf.data.Options()
    options.deterministic = False
    ds = files.interleave(
        _load_records, cycle_length=8, num_parallel_calls=tf.data.AUTOTUNE
    ).with_options(options)
    ds = ds.batch(CHUNK).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.flat_map(lambda x, y: _bucketed_chunk(x, y, batch_size)).repeat(repeat)
    return ds.map(pad, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A small encoder-decoder stand-in for the Transformer: the pooled source embedding
    added to each target position's embedding, a softmax over a reduced vocabulary."""
    vocab = 1024  # ids folded into it: a full 32k-way softmax per token is not needed here
    inputs = keras.Input(shape=(None,), dtype="int64", name="inputs")
    targets = keras.Input(shape=(None,), dtype="int64", name="targets")
    fold = keras.layers.Lambda(lambda t: t % vocab)
    embed = keras.layers.Embedding(vocab, 32)
    source = keras.layers.GlobalAveragePooling1D()(embed(fold(inputs)))
    x = keras.layers.Lambda(lambda a: a[0] + a[1][:, None, :])([embed(fold(targets)), source])
    logits = keras.layers.Dense(vocab)(x)
    m = keras.Model([inputs, targets], logits)

    def loss(y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(
            y_true % vocab, y_pred, from_logits=True
        )

    m.compile(optimizer="adam", loss=loss)
    return m
