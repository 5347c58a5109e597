"""Token-id TFRecords packed into fixed-length examples on the fly, as Tensor2Tensor packs them.

Source: tensorflow/tensor2tensor tensor2tensor/data_generators/generator_utils.py
(pack_dataset(dataset, length, keys) without its custom ops: a map trimming each example
to `length`, padded_batch(length), then _pack_with_tf_ops: a flat_map whose function runs a
tf.while_loop over the padded batch, appending each example to a partial packed example
or writing it out through TensorArrays, and returns Dataset.from_tensor_slices of the packed
examples ("Uses tf.while_loop. Slow."); inputs/targets plus their _segmentation and
_position). The records are read as a t2t Problem reads them (TFRecordDataset of the
shards, parse_single_example of VarLenFeature(int64) 'inputs' and 'targets', sparse to
dense), and the packed examples are batched. Ported to TF 2 (tf.to_int32 -> tf.cast,
output_shapes -> element_spec).

Flaw: the trimming map and the per-record parse run one example at a time and without
parallelism; the packing loop runs inside a flat_map (sequential, and one
from_tensor_slices dataset per 256 examples); no prefetch.
Twin: records parsed 256 at a time, the same padded batches of `length` examples (trimmed
once per batch), the same packing loop in a parallel map that returns the packed batch,
unbatch, batch, prefetch. The packing order is kept, so the packed examples are the same.
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, write_tfrecords

SOURCE = "tensorflow/tensor2tensor tensor2tensor/data_generators/generator_utils.py (pack_dataset)"
FORMAT = "TFRecord shards of tf.train.Example (variable-length token ids)"
KIND = "packing"
FLAW = "sequential trim map, padded_batch, a tf.while_loop packing loop in a flat_map"
TWIN = "batched parse, the same loop in a parallel map returning the packed batch, prefetch"
BATCH_SIZE = 32  # packed examples of LENGTH tokens
LENGTH = 256
VOCAB = 8000  # subword ids (t2t's vocabularies have 8k-32k)
# A t2t translation problem's training shards; "full" writes 500,000 pairs (WMT en-de has
# 4.5M) so that the writing takes about a minute.
FULL = 500_000
KEYS = ["inputs", "targets"]


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 1500, FULL)
    rng = np.random.default_rng(22)

    def examples():
        for _ in range(n):
            a = int(np.clip(rng.lognormal(3.0, 0.7), 1, 400))
            b = int(np.clip(a * rng.uniform(0.7, 1.4), 1, 400))
            yield {
                "inputs": rng.integers(2, VOCAB, a).tolist() + [1],  # EOS = 1
                "targets": rng.integers(2, VOCAB, b).tolist() + [1],
            }

    shards = 10 if size == "full" else 2
    write_tfrecords(str(Path(dir) / "translate-train-%05d-of-%05d"), examples(), shards)


def _decode_example(serialized):
    spec = {k: tf.io.VarLenFeature(tf.int64) for k in KEYS}
    parsed = tf.io.parse_single_example(serialized, spec)
    return {k: tf.sparse.to_dense(v) for k, v in parsed.items()}


# ---- the published pipeline (generator_utils.pack_dataset, _pack_with_tf_ops) --------------
def pack_dataset(dataset, length, keys=None):
    shapes = tf.nest.map_structure(lambda spec: spec.shape, dataset.element_spec)
    if keys is None:
        keys = shapes.keys()
    for k in keys:
        if k not in shapes:
            raise ValueError(f"Key {k} not found in dataset.  Available keys are {shapes.keys()}")
        if not shapes[k].is_compatible_with(tf.TensorShape([None])):
            raise ValueError("Tensors to be packed must be one-dimensional.")
    # trim to length
    dataset = dataset.map(lambda x: {k: x[k][:length] for k in keys})
    # Setting batch_size=length ensures that the concatenated sequences (if they
    # have length >=1) are sufficient to fill at least one packed example.
    batch_size = length
    dataset = dataset.padded_batch(batch_size, padded_shapes={k: [-1] for k in keys})
    return _pack_with_tf_ops(dataset, keys, length)


def _packed_batch(x, keys, length):
    """_pack_with_tf_ops' map_fn up to the packed tensors (its last line wraps them in
    Dataset.from_tensor_slices)."""
    empty_example = {}
    for k in keys:
        empty_example[k] = tf.zeros([0], dtype=tf.int64)
        empty_example[k + "_position"] = tf.zeros([0], dtype=tf.int32)
    keys_etc = empty_example.keys()

    def write_packed_example(partial, outputs):
        new_partial = empty_example.copy()
        new_outputs = {}
        for k in keys_etc:
            new_outputs[k] = outputs[k].write(
                outputs[k].size(), tf.pad(partial[k], [[0, length - tf.size(partial[k])]])
            )
        return new_partial, new_outputs

    partial = empty_example.copy()
    i = tf.zeros([], dtype=tf.int32)
    dynamic_batch_size = tf.shape(x[keys[0]])[0]
    outputs = {}
    for k in keys:
        outputs[k] = tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[length])
        outputs[k + "_position"] = tf.TensorArray(
            tf.int32, size=0, dynamic_size=True, element_shape=[length]
        )

    def cond_fn(i, partial, outputs):
        del partial, outputs
        return i < dynamic_batch_size

    def body_fn(i, partial, outputs):
        can_append = True
        one_example = {}
        for k in keys:
            val = x[k][i]
            val = val[: tf.reduce_sum(tf.cast(tf.not_equal(val, 0), tf.int32))]
            one_example[k] = val
        for k in keys:
            can_append = tf.logical_and(
                can_append, tf.less_equal(tf.size(partial[k]) + tf.size(one_example[k]), length)
            )

        def false_fn():
            return write_packed_example(partial, outputs)

        def true_fn():
            return partial, outputs

        partial, outputs = tf.cond(can_append, true_fn, false_fn)
        new_partial = {}
        for k in keys:
            new_seq = one_example[k][:length]
            new_seq_len = tf.size(new_seq)
            new_partial[k] = tf.concat([partial[k], new_seq], 0)
            new_partial[k + "_position"] = tf.concat(
                [partial[k + "_position"], tf.range(new_seq_len, dtype=tf.int32)], 0
            )
        partial = new_partial
        return i + 1, partial, outputs

    i, partial, outputs = tf.while_loop(
        cond_fn,
        body_fn,
        (i, partial, outputs),
        back_prop=False,
        shape_invariants=(
            tf.TensorShape([]),
            {k: tf.TensorShape([None]) for k in keys_etc},
            {k: tf.TensorShape(None) for k in keys_etc},
        ),
    )
    partial, outputs = write_packed_example(partial, outputs)
    packed = {k: outputs[k].stack() for k in keys_etc}
    for k in keys:
        packed[k + "_segmentation"] = tf.cumsum(
            tf.cast(tf.equal(packed[k + "_position"], 0), tf.int32), axis=1
        ) * tf.cast(tf.not_equal(packed[k], 0), tf.int32)
    return packed


def _pack_with_tf_ops(dataset, keys, length):
    def map_fn(x):
        return tf.data.Dataset.from_tensor_slices(_packed_batch(x, keys, length))

    return dataset.flat_map(map_fn)


def _features_and_labels(packed):
    return packed, packed["targets"]


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    files = sorted(str(p) for p in Path(dir).glob("translate-train-*"))
    dataset = tf.data.TFRecordDataset(files).map(_decode_example)
    dataset = pack_dataset(dataset, LENGTH, keys=KEYS)
    return dataset.batch(batch_size).map(_features_and_labels)


# ---- the hand-tuned twin --------------------------------------------------------------------
def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    spec = {k: tf.io.RaggedFeature(tf.int64) for k in KEYS}

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        return {k: v[:, :LENGTH] for k, v in parsed.items()}  # trimmed once per batch

    def pad(x):
        return {k: v.to_tensor() for k, v in x.items()}

    files = sorted(str(p) for p in Path(dir).glob("translate-train-*"))
    ds = tf.data.TFRecordDataset(files).batch(LENGTH)  # padded_batch(length)'s groups
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).map(pad)
    ds = ds.map(lambda x: _packed_batch(x, KEYS, LENGTH), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.unbatch().batch(batch_size)
    return ds.map(_features_and_labels).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A small stand-in for the packed Transformer: token and position embeddings of the
    packed targets, a softmax over the vocabulary per position."""
    names = [k + s for k in KEYS for s in ("", "_position", "_segmentation")]
    inputs = {}
    for name in names:
        dtype = "int64" if name in KEYS else "int32"
        inputs[name] = keras.Input(shape=(LENGTH,), dtype=dtype, name=name)
    tokens = keras.layers.Embedding(VOCAB, 32)(inputs["targets"])
    positions = keras.layers.Embedding(LENGTH, 32)(inputs["targets_position"])
    source = keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(VOCAB, 32)(inputs["inputs"])
    )
    x = keras.layers.Lambda(lambda a: a[0] + a[1] + a[2][:, None, :])([tokens, positions, source])
    m = keras.Model(inputs, keras.layers.Dense(VOCAB)(x))
    m.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return m
