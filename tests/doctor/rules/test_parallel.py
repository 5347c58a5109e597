"""The rules about work done one element after another (rules/parallel.py): a map without
num_parallel_calls (its gain what parallelism removes of the stage's cost, or the rate the
diagnosis timed the parallel pipeline at; dropped only when every paired repeat timed it
slower, twice: a median of a few short repeats on a busy host once read 0.8x for a map that
runs 1.3-1.9x faster in parallel), several files read in turn, and parallel stages kept in
order when training does not need it. Real datasets' graphs; nothing runs."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.evidence.evidence import PARALLEL
from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.rules import PREDICTED_BY, run_rules
from tfperf.doctor.rules.parallel import (
    NONDETERMINISTIC,
    PARALLEL_READS,
    rule_deterministic,
    rule_no_interleave,
    rule_sequential_map,
)


def _mapped_batches():
    ds = tf.data.Dataset.range(256).batch(8)
    return ds.map(lambda x: tf.sin(tf.cast(x, tf.float32)) * 2.0).prefetch(2)


def _codes(slow_map_evidence, **fields) -> list[str]:
    # The parallel pipeline's median: 0.8x of the pipeline.
    ctx = slow_map_evidence(_mapped_batches(), rewritten={PARALLEL: (80.0, 0.0)}, **fields)
    return [f.code for f in run_rules(ctx) if f.kind != "resume"]


def test_a_median_alone_below_the_pipeline_keeps_the_advice(slow_map_evidence):
    assert "sequential_map" in _codes(slow_map_evidence)


def test_slower_in_every_pair_drops_it(slow_map_evidence):
    assert "sequential_map" not in _codes(slow_map_evidence, slower={PARALLEL})


def test_a_sequential_map_spreads_its_cost_over_the_cores(slow_map_evidence):
    ds = tf.data.Dataset.range(64).batch(8).map(lambda b: tf.sin(tf.cast(b, tf.float32)))
    (f,) = rule_sequential_map(slow_map_evidence(ds))
    assert f.code == "sequential_map" and f.stage.startswith("map#2 (sequential")
    assert "num_parallel_calls=tf.data.AUTOTUNE" in f.change and "2 cores available" in f.evidence
    # Half of its 9 ms on the other core: the same work, faster, not cheaper.
    assert f.saves_wall == pytest.approx(4.5e-3) and f.saves_cpu == 0.0
    parallel = tf.data.Dataset.range(64).batch(8)
    parallel = parallel.map(lambda b: tf.sin(tf.cast(b, tf.float32)), num_parallel_calls=2)
    assert rule_sequential_map(slow_map_evidence(parallel)) == []


def test_a_python_map_made_parallel_gains_little(slow_map_evidence):
    def double(b):
        return tf.numpy_function(lambda v: v * 2, [b], tf.int64)

    ds = tf.data.Dataset.range(64).batch(8).map(double)
    (f,) = rule_sequential_map(slow_map_evidence(ds))
    # The GIL: a tenth of half the stage runs in parallel.
    assert f.saves_wall == pytest.approx(0.1 * 4.5e-3)


def test_files_read_one_after_another_are_named(evidence, record_files):
    ds = tf.data.TFRecordDataset(record_files).batch(10)
    st = next(s for s in evidence(ds).graph.stages if s.reads_files)
    timing = [StageTiming(st.index, st.label, st.kind, 100.0, 9000.0)]
    ctx = evidence(ds, pipeline=100.0, compute=1000.0, training=100.0, stages=timing, cores=2)
    (f,) = rule_no_interleave(ctx)
    assert f.code == "no_interleave" and f.title == "4 files read one after another"
    assert "cycle_length=min(files, 16)" in f.change
    assert f.saves_wall == pytest.approx(4.5e-3)  # two files at once on 2 cores
    assert PREDICTED_BY[PARALLEL_READS.label] == ("no_interleave",)
    files = tf.data.Dataset.from_tensor_slices(record_files)
    parallel = files.interleave(tf.data.TFRecordDataset, num_parallel_calls=2).batch(10)
    assert rule_no_interleave(evidence(parallel)) == []
    one = tf.data.TFRecordDataset(record_files[:1]).batch(10)
    assert rule_no_interleave(evidence(one)) == []


def test_parallel_stages_keeping_their_order_are_named(evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2, num_parallel_calls=2).batch(8)
    rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
    (f,) = rule_deterministic(evidence(ds, **rates))
    assert f.code == "deterministic" and f.stage.startswith("map#1 (parallel=2)")
    assert "with deterministic=False ? ex/s" in f.evidence and f.expected_speedup is None
    # Measured without the order: its rate is the gain.
    (f,) = rule_deterministic(evidence(ds, **rates, nondeterministic_rate=150.0))
    assert f.expected_speedup == pytest.approx(1.5)
    assert f.saves_wall == pytest.approx(1 / 100 - 1 / 150)
    assert PREDICTED_BY[NONDETERMINISTIC.label] == ("deterministic",)


def test_no_order_finding_where_nothing_keeps_order(evidence):
    options = tf.data.Options()
    options.deterministic = False
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2, num_parallel_calls=2).batch(8)
    assert rule_deterministic(evidence(ds.with_options(options))) == []
    sequential = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)
    assert rule_deterministic(evidence(sequential)) == []
