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
from tfperf.doctor.diagnosis.stages import (
    cache_candidate,
    paired_cost,
    remainder,
    slowest_stage,
    stage_prefix,
    stage_timings,
)
from tfperf.doctor.evidence.findings import StageTiming
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


# ---- paired per-round costs, ties and the unattributed remainder (pure logic) ---------------
def _rounds(name: str, *us: float) -> Measurement:
    """One 1,000-example repeat per round taking `us` microseconds per example (0: failed)."""
    return Measurement(name, [Run(u * 1e-3, 10, 1_000 if u else 0) for u in us])


@pytest.mark.parametrize(
    ("prev", "cur", "expected"),
    [
        # Rounds pair up: a host twice as slow in round 2 slows both prefixes, and the
        # differences (100, 200) are the stage's, not the rates' medians' difference.
        ((100.0, 200.0), (200.0, 400.0), (150.0, 100.0, 200.0)),
        # A prefix faster than the one before it is noise: cost 0, interval clipped at 0.
        ((300.0, 300.0, 300.0), (250.0, 260.0, 330.0), (0.0, 0.0, 30.0)),
        # The first stage: its own time per example.
        (None, (50.0, 70.0, 60.0), (60.0, 50.0, 70.0)),
        # A round where one of them failed is left out of the pairs.
        ((100.0, 0.0, 100.0), (150.0, 900.0, 170.0), (60.0, 50.0, 70.0)),
    ],
)
def test_a_stage_cost_is_the_median_of_paired_round_differences(prev, cur, expected):
    before = _rounds("prev", *prev) if prev is not None else None
    got = paired_cost(before, _rounds("cur", *cur))
    assert got == pytest.approx(expected)


def _timing(label: str, cost: float, low: float, high: float) -> StageTiming:
    return StageTiming(0, label, "map", 1.0, cost, us_low=low, us_high=high)


@pytest.mark.parametrize(
    ("costs", "named", "marked"),
    [
        # Separated beyond noise: the slowest one alone.
        ([("map#1", 300, 250, 350), ("shuffle#2", 100, 80, 240)], "map#1", ["map#1"]),
        # Overlapping intervals: a tie, said so, the larger median first.
        (
            [("shuffle#2", 100, 60, 260), ("map#1", 300, 250, 350)],
            "map#1 or shuffle#2 (within noise)",
            ["map#1", "shuffle#2"],
        ),
        # Three within noise of the slowest; the fourth is below its interval.
        (
            [("a", 10, 9, 11), ("b", 12, 8, 20), ("c", 11, 9, 14), ("d", 2, 1, 3)],
            "b or c or a (within noise)",
            ["b", "c", "a"],
        ),
        ([], None, []),
    ],
)
def test_the_slowest_stage_is_named_only_beyond_noise(costs, named, marked):
    assert slowest_stage([_timing(*c) for c in costs]) == (named, marked)


def test_stage_costs_that_disagree_with_the_pipeline_show_the_remainder():
    pipeline = Measurement("pipeline", [Run(s, 10, 1_000) for s in (0.170, 0.172, 0.175)])
    # 253 us/example of stages beside a pipeline of 170-175: beyond both intervals.
    over = [_timing("map#1", 180, 170, 190), _timing("shuffle#2", 73, 60, 80)]
    rest = remainder(over, pipeline)
    assert rest is not None
    assert rest.stages_us == 253.0 and rest.pipeline_us == 172.0
    assert rest.us_per_example == -81.0 and rest.low == -100.0 and rest.high == -55.0
    assert "unattributed: -81.0 (-100.0 to -55.0) us/example" in rest.text
    # Within their intervals: nothing unattributed.
    agree = [_timing("map#1", 100, 90, 120), _timing("shuffle#2", 70, 60, 80)]
    assert remainder(agree, pipeline) is None
