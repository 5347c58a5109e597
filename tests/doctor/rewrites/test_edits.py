"""The doctor's edits of a tf.data.Dataset (doctor/rewrites/edits.py): the multiset check of
the examples across batching, a per-example map moved after the batch (a batch-polymorphic
map gives the same examples; one that only takes a single example breaks, so --fix would not
keep it; a padded_batch keeps its map; of images decoded per file, batched, unbatched and
augmented, the decode stays and the augmentation moves), determinism set on every op, the
options and the float32 cast."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.edits import (
    batch_before_map,
    example_multiset,
    same_examples,
    set_deterministic,
    to_float32,
    with_options,
)

from helpers import slow_pipelines as sp
from helpers.doctorkit import padded_pipeline, token_records


def test_same_examples_compares_multisets_across_batching():
    ds = tf.data.Dataset.range(10)
    assert same_examples(ds.batch(3), ds.shuffle(10, seed=1).batch(4))
    assert not same_examples(ds.batch(3), ds.map(lambda x: x + 1).batch(3))
    assert not same_examples(ds, ds.take(9))
    assert sum(example_multiset(ds.batch(4)).values()) == 10


def test_batch_before_map_moves_a_polymorphic_map():
    ds = tf.data.Dataset.range(12).map(lambda x: tf.cast(x, tf.float32) * 2.0 + 1.0).batch(4)
    g = lint.read_graph(ds)
    moved, label = batch_before_map(g, ds)
    kinds = [s.kind for s in lint.read_graph(moved).stages]
    assert kinds.index("batch") < kinds.index("map")
    assert "vectorized" in label
    assert [list(b.numpy()) for b in moved] == [list(b.numpy()) for b in ds]


def test_batch_before_map_breaks_a_per_example_only_map():
    ds = tf.data.Dataset.range(8).map(lambda x: tf.reshape(tf.cast(x, tf.float32), [1]))
    ds = ds.batch(4)
    moved, _ = batch_before_map(lint.read_graph(ds), ds)
    # reshape([4] -> [1]) cannot take a batch: the rewrite fails, so --fix would not keep it
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(moved)


def test_fix_trials_never_keep_a_change_that_alters_examples(tmp_path):
    x = np.arange(64, dtype="float32").reshape(64, 1).repeat(sp.DIM, axis=1)
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).map(lambda a, b: (a, b)).batch(8)
    g = lint.read_graph(ds)
    moved = batch_before_map(g, ds)[0]
    assert same_examples(ds, moved)


def test_batch_before_map_leaves_a_padded_batch_alone():
    ds = padded_pipeline()
    assert batch_before_map(lint.read_graph(ds), ds) is None
    # a plain batch after the same kind of map still moves (the rewrite is not just off)
    plain = tf.data.Dataset.from_tensor_slices(token_records(64)).map(lambda r: r + "x").batch(8)
    assert batch_before_map(lint.read_graph(plain), plain) is not None


def test_a_decoding_map_stays_and_the_augmentation_after_unbatch_moves(tmp_path):
    paths = []
    for i in range(8):
        path = str(tmp_path / f"{i}.png")
        tf.io.write_file(path, tf.io.encode_png(tf.fill([6, 6, 3], tf.constant(i, tf.uint8))))
        paths.append(path)

    def load(p):
        return tf.image.resize(tf.io.decode_png(tf.io.read_file(p), channels=3), [4, 4])

    ds = tf.data.Dataset.from_tensor_slices(paths).map(load).batch(4).unbatch()
    ds = ds.map(lambda x: x / 255.0).batch(4)
    graph = lint.read_graph(ds)
    maps = [st.label for st in graph.stages if st.kind == "map"]  # the decode ... the division
    moved, label = batch_before_map(graph, ds)
    assert label == f"batch before {maps[-1]} (vectorized)", (label, maps)
    assert lint.read_graph(moved).stages[-1].kind == "map"  # the division now runs on batches


def test_set_deterministic_rewrites_attrs_and_keeps_examples():
    ds = tf.data.Dataset.range(50).map(lambda x: x * 2, num_parallel_calls=2, deterministic=True)
    nd = set_deterministic(lint.read_graph(ds), ds, False)
    assert [s.deterministic for s in lint.read_graph(nd).stages if s.kind == "map"] == ["false"]
    assert same_examples(ds, nd)


def test_options_switch_on_map_parallelization_and_autotune():
    ds = tf.data.Dataset.range(8).map(lambda x: x * 2)
    out = with_options(ds, map_parallelization=True, autotune=True)
    opts = out.options()
    assert opts.experimental_optimization.map_parallelization and opts.autotune.enabled
    assert [int(x) for x in out] == [int(x) for x in ds]
    assert not with_options(ds).options().experimental_optimization.map_parallelization


def test_float64_tensors_are_cast_to_float32_and_others_kept():
    ds = tf.data.Dataset.from_tensor_slices(
        ({"x": np.ones((4, 2)), "n": np.arange(4)}, np.ones((4, 1), np.float32))
    )
    out = ds.map(to_float32)
    features, label = out.element_spec
    assert features["x"].dtype == tf.float32 and features["n"].dtype == tf.int64
    assert label.dtype == tf.float32
    single = tf.data.Dataset.from_tensor_slices(np.arange(4.0)).map(to_float32)
    assert single.element_spec.dtype == tf.float32
    assert [float(x) for x in single] == [0.0, 1.0, 2.0, 3.0]


def test_batch_before_map_leaves_a_map_of_varying_or_ragged_examples_alone():
    """Batched first, examples of different lengths cannot stack ("Cannot add tensor to the
    batch") and a map written for one ragged or sparse example reads a batch's encoding of
    them wrongly: optimize showed TensorFlow's error as the candidate's verdict."""
    tags = tf.ragged.constant([[1] * (1 + i % 4) for i in range(40)], dtype=tf.int64)
    varying = tf.data.Dataset.from_tensor_slices(tags).map(lambda t: t).map(lambda t: t * 2)
    assert batch_before_map(lint.read_graph(varying.batch(1)), varying.batch(1)) is None
    ragged = tf.data.Dataset.from_tensor_slices(tf.expand_dims(tags, 1))  # [1, None] rows
    ragged = ragged.map(lambda t: t * 2).batch(4)
    assert batch_before_map(lint.read_graph(ragged), ragged) is None
    fixed = tf.data.Dataset.range(40).map(lambda i: tf.fill([3], i)).map(lambda v: v * 2)
    assert batch_before_map(lint.read_graph(fixed.batch(4)), fixed.batch(4)) is not None
