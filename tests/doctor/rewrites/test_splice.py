"""The graph surgery the source rewrites share (doctor/rewrites/splice.py), on real datasets'
GraphDefs: a dataset built in Python copied into another's graph under a prefix and spliced in
place of its source, the nodes nothing reads pruned, any node run as a dataset of its own, a
graph without its shuffles (one pass in the source's order), and Const values read back as
NumPy, strings included."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfperf.doctor.rewrites import splice


def _node(g, op: str):
    return next(n for n in g.node if n.op == op)


def test_a_dataset_spliced_in_place_of_the_source_feeds_the_rest():
    ds = tf.data.Dataset.range(5).map(lambda x: x * 10)
    g = splice.serialized(ds)
    old = _node(g, "RangeDataset")
    by_op = splice.import_dataset(g, tf.data.Dataset.range(3), "new")
    (new,) = by_op["RangeDataset"]
    assert new.name.startswith("new/") and all(r.startswith("new/") for r in new.input)
    assert "_Retval" not in by_op  # the copy's output is not the graph's
    splice.redirect(g, old.name, new.name)
    out = splice.rebuild(g, ds.element_spec)
    assert [int(x) for x in out] == [0, 10, 20]
    assert old.name not in {n.name for n in g.node}  # nothing reads it: pruned


def test_any_node_runs_as_a_dataset_of_its_own():
    ds = tf.data.Dataset.range(10).map(lambda x: x * 2).batch(4)
    g = splice.serialized(ds)
    mapped = splice.node_dataset(g, _node(g, "MapDataset").name)
    assert [int(x) for x in mapped] == [x * 2 for x in range(10)]
    assert [len(b) for b in splice.node_dataset(g, _node(g, "BatchDatasetV2").name)] == [4, 4, 2]


def test_without_its_shuffles_a_graph_gives_the_source_order():
    ds = tf.data.Dataset.range(20).shuffle(20, seed=1).map(lambda x: x + 1).shuffle(5).batch(4)
    g = splice.unshuffled(splice.serialized(ds))
    assert not any(n.op in splice.SHUFFLE_OPS for n in g.node)
    out = splice.rebuild(g, ds.element_spec)
    assert [int(x) for b in out for x in b] == list(range(1, 21))
    assert not splice.has_shuffle_and_repeat(g)


def test_const_values_come_back_as_numpy_strings_too():
    words = np.array([b"cat", b"dog", b"owl"])
    g = splice.serialized(tf.data.Dataset.from_tensor_slices((words, np.arange(3.0))))
    nodes = {n.name: n for n in g.node}
    values = [splice.const_array(nodes, n.name) for n in g.node if n.op == "Const"]
    assert any(v.dtype == object and list(v) == list(words) for v in values), values
    assert any(v.dtype == np.float64 and list(v) == [0.0, 1.0, 2.0] for v in values), values
    assert splice.const_array(nodes, _node(g, "TensorSliceDataset").name) is None
    assert splice.const_array(nodes, "no such node") is None


def test_a_declared_element_is_retyped():
    g = splice.serialized(tf.data.Dataset.range(4).batch(2))
    batch = _node(g, "BatchDatasetV2")
    splice.retype(batch, [tf.float32.as_datatype_enum], [splice.scalar_shape(-1, 3)])
    assert list(batch.attr["output_types"].list.type) == [tf.float32.as_datatype_enum]
    (shape,) = batch.attr["output_shapes"].list.shape
    assert [d.size for d in shape.dim] == [-1, 3]
