"""One map's function vectorized by TensorFlow's own vectorizer (doctor/rewrites/pfor_fn.py):
each function is traced once per process (the rules ask whether it converts, --fix asks for
the vectorized map: one trace), a refusal too; a refusal says why in a user's words, and
whether the map could only ever run one element at a time. Real pfor traces."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.pfor_fn import Refused, library_of, vectorize_function
from tfperf.doctor.rewrites.vectorize import refusal

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
