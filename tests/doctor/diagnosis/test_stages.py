"""The doctor's timing of a pipeline stage by stage (doctor/diagnosis/stages.py): every stage
prefix counts examples (a stage yielding blocks of records, split by a later unbatch, as
tfperf's own reader does, is split before it is batched: the chess reader once showed as the
slowest stage at 1,450 "examples"/s beside a pipeline of 129,355); variable-length examples
parsed one at a time before a padded_batch are timed too (batched as ragged); the time each
stage adds comes from the nested prefixes' rates; the cacheable prefix's end and size."""

from __future__ import annotations

import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.diagnosis.stages import cache_candidate, stage_prefix, stage_timings
from tfperf.doctor.graph import lint
from tfperf.measure import Measurement, Run

from helpers.doctorkit import BATCH, blocked_pipeline, padded_pipeline


def test_a_stage_of_blocks_is_timed_per_example():
    graph = lint.read_graph(blocked_pipeline())
    reader = next(st for st in graph.stages if st.kind == "interleave")
    ds, per_batch = stage_prefix(graph, reader, BATCH)
    assert per_batch == BATCH
    assert ds.element_spec.shape.rank == 0  # single examples, not blocks of 64
    pulled = next(iter(ds.batch(per_batch)))
    assert pulled.shape == (BATCH,)  # one pull: 32 examples, as the full pipeline's batch
    last = graph.stages[-1]
    assert stage_prefix(graph, last, BATCH)[1] is None  # batches already


FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def test_the_parse_before_padded_batch_is_timed_and_advised():
    diag = tfperf.diagnose(padded_pipeline(), None, overrides=[*FAST, "doctor.what_ifs=[]"])
    parse = next(s for s in diag.stages if s.kind == "map")
    assert parse.error is None and parse.examples_per_s, diag.stages
    advice = next(f for f in diag.findings if f.code == "per_example_parse")
    assert "tf.sparse.to_dense" in advice.change and "padded_batch" in advice.change


def _measured(name: str, rate: float) -> Measurement:
    return Measurement(name, [Run(seconds=1.0, batches=1, examples=int(rate))])


def test_each_stage_adds_the_difference_of_the_nested_prefixes():
    graph = lint.read_graph(tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8))
    source, mapped, batched = graph.stages
    probes = [(st, None) for st in graph.stages]
    measured = {
        f"stage {source.label}": _measured("source", 10_000.0),  # 100 us per example
        f"stage {mapped.label}": _measured("map", 2_000.0),  # 500 us: the map adds 400
    }
    errors = {f"stage {batched.label}": ValueError("cannot run alone")}
    timings = stage_timings(probes, measured, errors)
    assert [t.label for t in timings] == [s.label for s in graph.stages]
    assert timings[0].us_per_example == pytest.approx(100.0)
    assert timings[1].us_per_example == pytest.approx(400.0)
    assert timings[1].examples_per_s == 2_000.0
    assert timings[2].error == "cannot run alone" and timings[2].us_per_example is None


def test_the_cacheable_prefix_ends_before_random_content_with_its_size():
    noisy = tf.data.Dataset.range(100).map(lambda x: x * 2)
    noisy = noisy.map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64)).batch(4)
    last, n, size = cache_candidate(lint.read_graph(noisy))
    assert last.label == "map#1 (sequential)" and n == 100 and size == 100 * 8  # int64s
    # A source shuffled first (list_files): its one-to-one maps are cacheable after it.
    shuffled = tf.data.Dataset.range(100).shuffle(100).map(lambda x: x * 2).batch(4)
    last, n, _ = cache_candidate(lint.read_graph(shuffled))
    assert last.label == "map#2 (sequential)" and n == 100
    # Deterministic all the way: nothing to cache before anything.
    assert cache_candidate(lint.read_graph(tf.data.Dataset.range(10).map(lambda x: x + 1))) is None
