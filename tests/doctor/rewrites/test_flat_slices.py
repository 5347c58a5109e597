"""A flat_map of tensor slices made a parallel map + unbatch (rewrites/flat_slices.py): the
same elements in the same order, the function on several cores; a flat_map of one tensor a
map; any other flat_map left alone; the diagnosis names it and --fix offers it."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.fix.candidates import dataset_candidates
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.flat_slices import map_then_unbatch, slice_flat_maps
from tfperf.doctor.rules.parallel import FLAT_MAP_SLICES


def _pairs(x: tf.Tensor) -> tf.data.Dataset:
    """A batch of ids cut into (id, id squared) rows of a dict, as a packing loop returns."""
    return tf.data.Dataset.from_tensor_slices({"id": x, "square": tf.cast(x * x, tf.float32)})


def _rows(ds: tf.data.Dataset) -> list[tuple[int, float]]:
    return [(int(e["id"]), float(e["square"])) for e in ds.as_numpy_iterator()]


def test_a_flat_map_of_slices_is_a_parallel_map_and_an_unbatch_in_the_same_order():
    ds = tf.data.Dataset.range(50).batch(7).flat_map(_pairs).batch(4)
    graph = lint.read_graph(ds)
    assert [s.kind for s in slice_flat_maps(graph)] == ["flat_map"]
    # Its elements are single rows again, as after an unbatch: a stage prefix ending there
    # counts one example per element (a packed [256] row was once counted as 256 examples,
    # which made the packing loop look free).
    assert [s.batched for s in graph.stages] == [False, True, False, True]
    out = map_then_unbatch(graph, ds)
    assert out is not None
    ops = [s.op for s in lint.read_graph(out).stages]
    assert "FlatMapDataset" not in ops, ops
    assert ops[-3:] == ["ParallelMapDatasetV2", "UnbatchDataset", "BatchDatasetV2"], ops
    assert _rows(out.unbatch()) == _rows(ds.unbatch())  # the same rows, in the same order
    assert out.element_spec == ds.element_spec


def test_a_flat_map_of_one_tensor_is_a_map():
    ds = tf.data.Dataset.range(9).flat_map(lambda x: tf.data.Dataset.from_tensors(x * 3))
    out = map_then_unbatch(lint.read_graph(ds), ds)
    assert out is not None
    assert [s.op for s in lint.read_graph(out).stages][-1] == "ParallelMapDatasetV2"
    assert list(out.as_numpy_iterator()) == [x * 3 for x in range(9)]


def test_other_flat_maps_are_left_alone():
    ds = tf.data.Dataset.range(5).flat_map(lambda x: tf.data.Dataset.range(x))
    sliced_then_mapped = tf.data.Dataset.range(20).batch(5).flat_map(lambda x: _pairs(x).take(2))
    for each in (ds, sliced_then_mapped):
        graph = lint.read_graph(each)
        assert slice_flat_maps(graph) == []
        assert map_then_unbatch(graph, each) is None
        assert FLAT_MAP_SLICES.label not in dict(dataset_candidates(graph, each, None))


def test_the_doctor_names_it_and_fix_offers_it():
    import tfperf

    def slow_pairs(x: tf.Tensor) -> tf.data.Dataset:
        for _ in range(20):  # work per call: the stage worth spreading over the cores
            x = x + tf.cast(tf.reduce_sum(tf.sin(tf.cast(x, tf.float32))) * 0, tf.int64)
        return _pairs(x)

    ds = tf.data.Dataset.range(4096).batch(16).flat_map(slow_pairs).batch(32)
    graph = lint.read_graph(ds)
    assert FLAT_MAP_SLICES.label in dict(dataset_candidates(graph, ds, None))
    overrides = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.what_ifs=[]"]
    diag = tfperf.diagnose(ds, None, label="square", overrides=overrides, budget_s=20)
    codes = [f.code for f in diag.findings]
    assert "flat_map_slices" in codes or any("not measured" in n for n in diag.notes), codes
