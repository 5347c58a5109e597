"""Pipelines with ragged and sparse tensors, as a user with variable-length tags or boxes
writes them: a RaggedTensor at the source (`from_tensor_slices`), then `padded_batch` or
`ragged_batch`, a sparse feature. Each is a run file's `data.pipeline`
('helpers.ragged_pipelines:<name>'); `bag_model` takes the padded tags."""

from __future__ import annotations

import tensorflow as tf

N = 600
VOCAB = 10


def _tags(n: int = N) -> tf.RaggedTensor:
    """Tags 1..9, 1 to 6 of them per example (none ends in 0: stripped padding is exact)."""
    return tf.ragged.constant([[i % 9 + 1] * (1 + i % 6) for i in range(n)], dtype=tf.int64)


def ragged_source(batch_size: int = 32) -> tf.data.Dataset:
    """Ragged tags at the source, shuffled, a per-example map, ragged batches: features
    stay ragged to the end (as a model with ragged inputs would take them)."""
    ds = tf.data.Dataset.from_tensor_slices({"tags": _tags(), "y": tf.range(N) % 2})
    ds = ds.shuffle(200).map(lambda e: ({"tags": e["tags"] * 2}, tf.cast(e["y"], tf.float32)))
    return ds.ragged_batch(batch_size).prefetch(2)


def padded_tags(batch_size: int = 32) -> tf.data.Dataset:
    """Ragged tags at the source, padded to each batch's longest: what bag_model eats."""
    ds = tf.data.Dataset.from_tensor_slices({"tags": _tags(), "y": tf.range(N) % 2})
    ds = ds.shuffle(200).map(lambda e: (e["tags"] + 0, tf.cast(e["y"], tf.float32)))
    return ds.padded_batch(batch_size).prefetch(2)


def sparse_features(batch_size: int = 32) -> tf.data.Dataset:
    """A sparse feature made per example (entries with gaps), batched, beside a dense one."""

    def one(i: tf.Tensor) -> tuple[dict[str, tf.Tensor | tf.SparseTensor], tf.Tensor]:
        sp = tf.sparse.SparseTensor([[0], [2]], tf.stack([i, i + 1]), [5])
        return {"ids": sp, "x": tf.cast(i, tf.float32)}, tf.cast(i % 2, tf.float32)

    return tf.data.Dataset.range(N).shuffle(100).map(one).batch(batch_size)


def bag_model():
    import keras

    return keras.Sequential(
        [
            keras.Input((None,), dtype="int64"),
            keras.layers.Embedding(VOCAB, 4),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ],
        name="bag",
    )
