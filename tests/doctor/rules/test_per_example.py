"""The per-example stage rules (rules/per_example.py): a Python function in a map, data fed
from a Python generator, examples parsed one at a time before the batch and per-example maps
that could run on batches, each an "input" finding on its stage whose expected gain is the
share of the stage's measured cost its change removes. On real datasets' graphs, the stage
timed at 9 ms of a 100 ex/s pipeline; nothing runs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph.read import GraphStage
from tfperf.doctor.rules import PREDICTED_BY
from tfperf.doctor.rules.per_example import (
    BATCHED_PARSE,
    rule_from_generator,
    rule_per_example_map,
    rule_per_example_parse,
    rule_py_function,
)

SPEC = {"x": tf.io.FixedLenFeature([4], tf.float32), "tokens": tf.io.VarLenFeature(tf.int64)}


def timed(evidence, ds: tf.data.Dataset, pick: Callable[[GraphStage], bool]):
    """`ds`'s Evidence, input-bound on 2 cores, with the stage `pick` chooses taking 90% of
    the pipeline's time (100 ex/s; the model alone 1,000 ex/s)."""
    st = next(s for s in evidence(ds).graph.stages if pick(s))
    timing = StageTiming(st.index, st.label, st.kind, 100.0, 9000.0)
    rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
    return evidence(ds, **rates, input_bound_fraction=0.8, stages=[timing], cores=2)


def _records(n: int = 32) -> list[bytes]:
    out = []
    for i in range(n):
        feats = {
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)] * 4)),
            "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=[i] * (1 + i % 5))),
        }
        ex = tf.train.Example(features=tf.train.Features(feature=feats))
        out.append(ex.SerializeToString())
    return out


def _is_map(st: GraphStage) -> bool:
    return st.kind == "map"


def test_a_python_function_in_a_map_is_named_with_its_offline_change(evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: tf.numpy_function(lambda v: v * 2, [x], tf.int64))
    ctx = timed(evidence, ds.batch(8), _is_map)
    (f,) = rule_py_function(ctx)
    assert f.code == "py_function" and f.kind == "input" and f.stage.startswith("map#1")
    assert "`tfperf convert`" in f.change
    # The whole stage's cost is gone offline: 9 ms of 10 ms per example.
    assert f.saves_wall == pytest.approx(9e-3) and f.expected_speedup == pytest.approx(10.0)
    # Not a map to vectorize: Python runs one element at a time.
    assert rule_per_example_map(ctx) == []


def test_a_generator_is_named_as_such_not_as_a_python_function(evidence):
    def gen():
        yield from range(64)

    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int64))
    ctx = timed(evidence, ds.batch(8), lambda s: s.is_generator)
    (f,) = rule_from_generator(ctx)
    assert f.code == "from_generator" and "TFRecord shards" in f.change
    assert rule_py_function(ctx) == []


def test_examples_parsed_one_at_a_time_before_the_batch(evidence):
    records = tf.data.Dataset.from_tensor_slices(_records())
    one = records.map(lambda r: tf.io.parse_single_example(r, {"x": SPEC["x"]})["x"])
    (f,) = rule_per_example_parse(timed(evidence, one.batch(8), _is_map))
    assert f.code == "per_example_parse" and "tf.io.parse_example" in f.change
    assert "padded_batch" not in f.change
    assert PREDICTED_BY[BATCHED_PARSE.label] == ("per_example_parse",)
    # Parsed by batch already: nothing to say.
    batched = records.batch(8).map(lambda r: tf.io.parse_example(r, {"x": SPEC["x"]})["x"])
    assert rule_per_example_parse(timed(evidence, batched, _is_map)) == []


def test_a_parse_before_padded_batch_gets_the_padding_by_hand(evidence):
    def parse(r):
        ex = tf.io.parse_single_example(r, SPEC)
        return ex["x"], tf.sparse.to_dense(ex["tokens"])

    ds = tf.data.Dataset.from_tensor_slices(_records()).map(parse).padded_batch(8)
    (f,) = rule_per_example_parse(timed(evidence, ds, _is_map))
    assert "before padded_batch" in f.change and "tf.sparse.to_dense" in f.change


def test_a_per_example_map_worth_batching_is_named(evidence):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((64, 8), np.float32))
    ds = ds.map(lambda x: tf.tanh(x * 2.0) + 1.0).batch(8)
    (f,) = rule_per_example_map(timed(evidence, ds, _is_map))
    assert f.code == "per_example_map" and f.stage.startswith("map#1")
    assert "move the map after batch()" in f.change
    # 90% of the stage's cost is removed: 8.1 ms of 10 ms per example.
    assert f.saves_wall == pytest.approx(8.1e-3) and f.expected_speedup > 5


@pytest.mark.parametrize(
    "build",
    [
        # A map on whole batches already.
        lambda: tf.data.Dataset.range(64).batch(8).map(lambda b: b * 2),
        # No batch after it: the elements are what the model gets.
        lambda: tf.data.Dataset.range(64).map(lambda x: x * 2),
    ],
    ids=["after-batch", "no-batch"],
)
def test_maps_that_are_not_per_example_before_a_batch_get_none(build, evidence):
    assert rule_per_example_map(timed(evidence, build(), _is_map)) == []


def test_a_cheap_per_example_map_is_not_worth_changing(evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)
    st = next(s for s in evidence(ds).graph.stages if s.kind == "map")
    cheap = [StageTiming(st.index, st.label, st.kind, 100_000.0, 0.1)]  # 1% of the time
    assert rule_per_example_map(evidence(ds, pipeline=100.0, stages=cheap)) == []


def test_a_python_map_removed_gains_at_least_what_it_gained_in_parallel(evidence):
    from tfperf.doctor.evidence.evidence import PARALLEL
    from tfperf.doctor.graph import lint
    from tfperf.doctor.rules import run_rules

    def double(b):
        return tf.numpy_function(lambda v: v * 2, [b], tf.int64)

    ds = tf.data.Dataset.range(64).batch(8).map(double)
    st = next(s for s in lint.read_graph(ds).stages if s.kind == "map")
    # The stage's cost read low (3 ms of the pipeline's 10 ms, a noisy difference of
    # prefixes), while the pipeline with it in parallel was timed at 1.9x.
    timing = StageTiming(st.index, st.label, st.kind, 100.0, 3000.0)
    rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
    ctx = evidence(
        ds,
        **rates,
        input_bound_fraction=0.8,
        stages=[timing],
        cores=2,
        rewritten={PARALLEL: (190.0, 0.0)},
    )
    (py,) = rule_py_function(ctx)
    assert py.expected_speedup is not None and py.expected_speedup >= 1.85
    assert "timed with it in parallel" in py.evidence
    # Equal gains: the more specific cause (take the Python out) leads.
    codes = [f.code for f in run_rules(ctx) if f.kind == "input"]
    assert codes.index("py_function") < codes.index("sequential_map"), codes
    # Without the timing, the stage's own estimate stands (3 ms of 10 removed: ~1.4x).
    ctx = evidence(ds, **rates, input_bound_fraction=0.8, stages=[timing], cores=2)
    (py,) = rule_py_function(ctx)
    assert py.expected_speedup is not None and py.expected_speedup < 1.5
