"""The questions the doctor asks of a pipeline's graph (doctor/graph/lint.py): a prefix
rebuilt as a dataset of its own, the deterministic (cacheable) prefix, float64 outputs by
their path, the parallel stages that keep their order, the cardinality tf.data knows and a
GraphDef rebuilt as a dataset. Real datasets; only the prefixes run."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfperf.doctor.graph import lint


def test_prefix_dataset_yields_the_prefix_elements():
    ds = tf.data.Dataset.range(10).map(lambda x: x * 3).batch(4).map(lambda b: b + 1)
    g = lint.read_graph(ds)
    after_first_map = lint.prefix_dataset(g, g.stages[1])
    assert [int(v) for v in after_first_map] == [x * 3 for x in range(10)]
    whole = lint.prefix_dataset(g, g.stages[-1])
    assert [list(v.numpy()) for v in whole] == [list(v.numpy()) for v in ds]


def test_deterministic_prefix_stops_at_randomness():
    ds = (
        tf.data.Dataset.range(10)
        .map(lambda x: x + 1)
        .map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64))
        .batch(2)
    )
    g = lint.read_graph(ds)
    assert [s.kind for s in lint.deterministic_prefix(g)] == ["source", "map"]


def test_float64_outputs_are_named_by_their_path():
    x = {"a": np.ones((4, 2)), "b": np.ones((4, 2), np.float32)}
    ds = tf.data.Dataset.from_tensor_slices((x, np.ones(4))).batch(2)
    assert lint.float64_outputs(lint.read_graph(ds)) == ["features/a", "labels"]
    flat = tf.data.Dataset.from_tensor_slices(np.ones((4, 2), np.float32))
    assert lint.float64_outputs(lint.read_graph(flat)) == []


def test_parallel_stages_keeping_their_order():
    r = tf.data.Dataset.range(16)
    ordered = r.map(lambda x: x * 2, num_parallel_calls=2).batch(4)
    assert [s.kind for s in lint.deterministic_stages(lint.read_graph(ordered))] == ["map"]
    free = r.map(lambda x: x * 2, num_parallel_calls=2, deterministic=False).batch(4)
    assert lint.deterministic_stages(lint.read_graph(free)) == []
    options = tf.data.Options()
    options.deterministic = False
    assert lint.deterministic_stages(lint.read_graph(ordered.with_options(options))) == []
    sequential = r.map(lambda x: x * 2).batch(4)
    assert lint.deterministic_stages(lint.read_graph(sequential)) == []


def test_known_cardinality_and_a_rebuilt_graph():
    ds = tf.data.Dataset.range(10).map(lambda x: x + 1).batch(4)
    assert lint.known_cardinality(ds) == 3
    assert lint.known_cardinality(ds.repeat()) is None
    assert lint.known_cardinality(ds.filter(lambda b: True)) is None
    g = lint.read_graph(ds)
    again = lint.rebuild(g.graph_def, ds.element_spec)
    assert [list(b.numpy()) for b in again] == [list(b.numpy()) for b in ds]


def _ragged_pipeline() -> tf.data.Dataset:
    tags = tf.ragged.constant([[i % 7] * (1 + i % 4) for i in range(40)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices({"tags": tags, "y": tf.range(40)}).shuffle(10)
    ds = ds.map(lambda d: ({"tags": d["tags"] * 2}, d["y"]))
    return ds.ragged_batch(4).prefetch(2)


def test_a_prefix_holding_ragged_tensors_keeps_its_structure():
    """The graph records a ragged component as one opaque variant: a prefix rebuilt from
    the flat types yielded variants that nothing could read (element_bytes crashed)."""
    ds = _ragged_pipeline()
    g = lint.read_graph(ds)
    batch = next(st for st in g.stages if st.kind == "batch")
    assert batch.composite and batch.element_spec == ds.element_spec
    features, labels = next(iter(lint.prefix_dataset(g, batch)))
    assert isinstance(features["tags"], tf.RaggedTensor) and features["tags"].nrows() == 4
    assert labels.shape == (4,)
    source = lint.prefix_dataset(g, g.stages[0])
    assert next(iter(source))["tags"].numpy().tolist() == [0]  # a ragged row: a dense tensor


def test_a_prefix_holding_sparse_tensors_keeps_its_structure_through_an_unbatch():
    ds = tf.data.Dataset.range(10).map(
        lambda i: tf.sparse.SparseTensor([[0], [2]], [i, i + 1], [5])
    )
    ds = ds.batch(3).unbatch().batch(2)
    g = lint.read_graph(ds)
    unbatch = next(st for st in g.stages if st.kind == "unbatch")
    first = next(iter(lint.prefix_dataset(g, unbatch)))
    assert isinstance(first, tf.SparseTensor)
    assert tf.sparse.to_dense(first).numpy().tolist() == [0, 0, 1, 0, 0]
    last = next(iter(lint.prefix_dataset(g, g.stages[-1])))
    assert last.dense_shape.numpy().tolist() == [2, 5]


def test_a_rebuilt_ragged_pipeline_carries_its_spec_back_through_pass_through_stages():
    """A dataset rebuilt from its graph has no Python chain: the output's spec still holds
    for the stages that keep their input's elements (prefetch), not before a map."""
    ds = _ragged_pipeline()
    g = lint.read_graph(lint.rebuild(lint.read_graph(ds).graph_def, ds.element_spec))
    by_kind = {st.kind: st for st in g.stages}
    assert by_kind["prefetch"].element_spec == ds.element_spec
    assert by_kind["source"].element_spec is None  # its structure is not known here
    assert next(iter(lint.prefix_dataset(g, by_kind["source"])))[0].dtype == tf.variant


def test_a_prefix_of_nested_datasets_stays_flat():
    """window() yields datasets: its prefix keeps yielding their variants (a count of one
    example each), not Dataset objects the pulling loop cannot count."""
    ds = tf.data.Dataset.range(20).window(4).flat_map(lambda w: w.batch(4))
    g = lint.read_graph(ds)
    window = next(st for st in g.stages if "Window" in st.op)
    assert window.composite and window.element_spec is None
    assert next(iter(lint.prefix_dataset(g, window))).dtype == tf.variant
