"""One map's function vectorized by TensorFlow's own vectorizer (doctor/rewrites/pfor_fn.py):
each function is traced once per process (the rules ask whether it converts, --fix asks for
the vectorized map: one trace), a refusal too; a refusal says why in a user's words, and
whether the map could only ever run one element at a time. Real pfor traces."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.pfor_fn import Refused, library_of, vectorize_function
from tfperf.doctor.rewrites.vectorize import refusal, vectorize_maps
from tfperf.testing import assert_same_examples

from helpers.doctorkit import jpegs, load_jpeg


def test_each_function_is_traced_once(tmp_path):
    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32) * 3.0).batch(8)
    graph = lint.read_graph(ds)
    nodes = {n.name: n for n in graph.graph_def.node}
    node = nodes[next(s for s in graph.stages if s.kind == "map").name]
    first = vectorize_function(graph.graph_def, nodes, node, -1)
    assert vectorize_function(graph.graph_def, nodes, node, -1) is first  # remembered
    # A refusal is remembered too, and the rule's question reuses the fix's trace.
    bad = tf.data.Dataset.list_files(jpegs(tmp_path / "dogs", 2), shuffle=False).map(load_jpeg)
    graph = lint.read_graph(bad.batch(2))
    st = next(s for s in graph.stages if s.kind == "map")
    why = refusal(graph, st)
    assert why is not None and why.per_element and str(refusal(graph, st)) == str(why)
    nodes = {n.name: n for n in graph.graph_def.node}
    with pytest.raises(Refused, match="per example|decodes"):
        vectorize_function(graph.graph_def, nodes, nodes[st.name], -1)


def _map_node(ds: tf.data.Dataset) -> tuple[lint.DatasetGraph, dict, object]:
    graph = lint.read_graph(ds)
    nodes = {n.name: n for n in graph.graph_def.node}
    return graph, nodes, nodes[next(s for s in graph.stages if s.kind == "map").name]


def test_the_vectorized_function_takes_the_examples_input():
    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32) * 5.0).batch(8)
    graph, nodes, node = _map_node(ds)
    vec = vectorize_function(graph.graph_def, nodes, node, -1)
    names = {f.signature.name for f in vec.fdefs}
    assert vec.name in names
    assert vec.in_types == [tf.int64.as_datatype_enum]  # one int64 example in


def test_a_python_function_is_refused_with_its_name():
    ds = tf.data.Dataset.range(8).map(lambda x: tf.numpy_function(lambda v: v, [x], tf.int64))
    graph, nodes, node = _map_node(ds.batch(4))
    with pytest.raises(Refused, match="numpy_function") as info:
        vectorize_function(graph.graph_def, nodes, node, -1)
    assert not info.value.per_element  # a batched rewrite by hand is still possible


def test_the_library_holds_the_function_and_what_it_calls():
    inner = tf.function(lambda x: x * 3)
    ds = tf.data.Dataset.range(8).map(lambda x: inner(x) + 1).batch(4)
    graph, _, node = _map_node(ds)
    lib = library_of(graph.graph_def, node.attr["f"].func.name)
    assert len(lib.function) >= 2  # the map's function and the tf.function it calls
    assert node.attr["f"].func.name in {f.signature.name for f in lib.function}
    assert len(library_of(graph.graph_def, "no such function").function) == 0


# ---- crops of a per-example size padded back to a fixed shape (masked_crop.py) ----------
def _cutout(i: tf.Tensor) -> tf.Tensor:
    """A patch of a size and place that differ per example (from its index), padded back
    to 8x11 with -7 at another per-example place."""
    i32 = tf.cast(i, tf.int32)
    img = tf.reshape(tf.range(60, dtype=tf.int32), [6, 10]) * (i32 + 1)
    patch = tf.slice(img, tf.stack([i32 % 3, i32 % 5]), tf.stack([i32 % 4 + 1, -1]))
    h, w = tf.shape(patch)[0], tf.shape(patch)[1]
    padded = tf.pad(patch, [[1, 7 - h], [i32 % 2, 11 - w - i32 % 2]], constant_values=-7)
    return tf.ensure_shape(padded, [8, 11])


def _boxes(i: tf.Tensor) -> tf.Tensor:
    """tf.image's pair: a box of a per-example size and offset, put back at another."""
    img = tf.reshape(tf.range(64, dtype=tf.float32), [8, 8, 1]) + tf.cast(i, tf.float32)
    h, y = tf.cast(i % 4 + 1, tf.int32), tf.cast(i % 3, tf.int32)
    patch = tf.image.crop_to_bounding_box(img, y, y + 1, h, h + 1)
    return tf.image.pad_to_bounding_box(patch, y, 1, 8, 8)


@pytest.mark.parametrize("crop", [_cutout, _boxes])
def test_a_crop_of_a_per_example_size_padded_back_vectorizes(crop):
    ds = tf.data.Dataset.range(10).map(crop).batch(4)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and len(result.done) == 1
    before, after = list(ds.as_numpy_iterator()), list(result.dataset.as_numpy_iterator())
    assert [b.shape for b in after] == [b.shape for b in before]
    for old, new in zip(before, after, strict=True):  # in order, value for value
        np.testing.assert_array_equal(new, old)
    assert_same_examples(ds, result.dataset)
    # Not all the same crop: the rewrite met per-example sizes and places.
    assert len({(b != b.flat[0]).sum() for b in np.concatenate(before)}) > 3


def test_a_ragged_crop_is_still_refused_for_its_per_example_size():
    def ragged(i):  # no pad back: each example keeps its own number of rows
        img = tf.reshape(tf.range(60, dtype=tf.int32), [6, 10]) * tf.cast(i, tf.int32)
        return tf.slice(img, [0, 0], tf.stack([tf.cast(i % 4 + 1, tf.int32), 3]))

    graph, nodes, node = _map_node(tf.data.Dataset.range(8).map(ragged).batch(4))
    with pytest.raises(Refused, match="size differs per example"):
        vectorize_function(graph.graph_def, nodes, node, -1)


def test_a_crop_padded_to_a_shape_unknown_before_running_is_refused():
    def unknown(i):  # the padded size itself differs per example
        i32 = tf.cast(i, tf.int32)
        img = tf.reshape(tf.range(60, dtype=tf.int32), [6, 10]) * i32
        patch = tf.slice(img, [0, 0], tf.stack([i32 % 4 + 1, 3]))
        return tf.pad(patch, [[0, i32 % 2], [0, 0]])

    graph, nodes, node = _map_node(tf.data.Dataset.range(8).map(unknown).batch(4))
    with pytest.raises(Refused, match="size differs per example"):
        vectorize_function(graph.graph_def, nodes, node, -1)
