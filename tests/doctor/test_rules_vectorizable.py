"""The per-example map rule asks TensorFlow's vectorizer first: a map using an op that has
no batched form (a file read, a JPEG decode) gets `sequential_map` (parallel map), with the
reason, instead of `per_example_map` (vectorize), which --fix could only fall back from; a
map pfor converts, or one a user can write for a batch by hand (text split into ragged
pieces), still gets per_example_map. Real JPEG files, real pfor traces, traced once."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rules import run_rules


def _jpegs(folder: Path, n: int = 6) -> str:
    """`n` small JPEG files; their glob."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        pixels = tf.random.stateless_uniform([20, 24, 3], seed=[i, 1], maxval=255, dtype=tf.int32)
        tf.io.write_file(str(folder / f"{i}.jpg"), tf.io.encode_jpeg(tf.cast(pixels, tf.uint8)))
    return str(folder / "*.jpg")


def _load(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    return tf.image.resize(image, [16, 16]) / 255.0


def test_a_map_pfor_cannot_convert_gets_a_parallel_map_first(slow_map_evidence, tmp_path):
    ds = tf.data.Dataset.list_files(_jpegs(tmp_path / "cats"), shuffle=False)
    ds = ds.map(_load).batch(4).prefetch(2)
    found = [f for f in run_rules(slow_map_evidence(ds)) if f.kind != "resume"]
    codes = [f.code for f in found]
    assert codes[0] == "sequential_map" and "per_example_map" not in codes, codes
    # The reason pfor gives, in a user's words, beside the parallel map's evidence.
    assert "cannot run on whole batches" in found[0].evidence, found[0].evidence
    assert "one file per example" in found[0].evidence or "decodes images" in found[0].evidence


def _words(line):
    return tf.strings.to_hash_bucket_fast(tf.strings.split(line)[:4], 100)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tf.sin(tf.cast(x, tf.float32)) * 2.0,  # pfor converts it
        # pfor refuses the split (ragged pieces), but tf.strings.split takes a batch too.
        lambda x: tf.size(_words(tf.strings.as_string(x) + " a b")),
    ],
    ids=["converted", "by-hand"],
)
def test_a_map_that_can_run_on_batches_still_gets_vectorize_advice(fn, slow_map_evidence):
    ds = tf.data.Dataset.range(64).map(fn)
    codes = [f.code for f in run_rules(slow_map_evidence(ds.batch(8).prefetch(2)))]
    assert codes[0] == "per_example_map", codes


def test_each_function_is_traced_once(tmp_path):
    from tfperf.doctor.rewrites.pfor_fn import Refused, vectorize_function
    from tfperf.doctor.rewrites.vectorize import refusal

    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32) * 3.0).batch(8)
    graph = lint.read_graph(ds)
    nodes = {n.name: n for n in graph.graph_def.node}
    node = nodes[next(s for s in graph.stages if s.kind == "map").name]
    first = vectorize_function(graph.graph_def, nodes, node, -1)
    assert vectorize_function(graph.graph_def, nodes, node, -1) is first  # remembered
    # A refusal is remembered too, and the rule's question reuses the fix's trace.
    bad = tf.data.Dataset.list_files(_jpegs(tmp_path / "dogs", 2), shuffle=False).map(_load)
    graph = lint.read_graph(bad.batch(2))
    st = next(s for s in graph.stages if s.kind == "map")
    why = refusal(graph, st)
    assert why is not None and why.per_element and str(refusal(graph, st)) == str(why)
    nodes = {n.name: n for n in graph.graph_def.node}
    with pytest.raises(Refused, match="per example|decodes"):
        vectorize_function(graph.graph_def, nodes, nodes[st.name], -1)
