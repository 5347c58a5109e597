"""What a stage costs (rules/stage_cost.py), as the per-stage rules read it. A per-example map
is asked of TensorFlow's vectorizer first: a map using an op that has no batched form (a file
read, a JPEG decode) gets `sequential_map` (parallel map), with the reason, instead of
`per_example_map` (vectorize), which --fix could only fall back from; a map pfor converts, or
one a user can write for a batch by hand (text split into ragged pieces), still gets
per_example_map. A timed rewrite's rate replaces the estimate; a prefix's cost is its timed
rate when there is one. Real JPEG files, real pfor traces."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.evidence.evidence import VECTORIZED
from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.stage_cost import fixed_share, per_element, prefix_cost

from helpers.doctorkit import jpegs, load_jpeg


def test_a_map_pfor_cannot_convert_gets_a_parallel_map_first(slow_map_evidence, tmp_path):
    ds = tf.data.Dataset.list_files(jpegs(tmp_path / "cats"), shuffle=False)
    ds = ds.map(load_jpeg).batch(4).prefetch(2)
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


def test_a_timed_vectorized_pipeline_replaces_the_estimate(slow_map_evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: tf.sin(tf.cast(x, tf.float32))).batch(8)
    ctx = slow_map_evidence(ds, rewritten={VECTORIZED: (500.0, 0.0)})
    (f,) = [f for f in run_rules(ctx) if f.code == "per_example_map"]
    assert "timed with the rewrite: 500 ex/s" in f.evidence
    # 100 -> 500 ex/s as timed, not the 90% of the stage's cost estimated (526 ex/s).
    assert f.saves_wall == pytest.approx(1 / 100 - 1 / 500) and f.expected_speedup == 5.0


def test_what_a_more_specific_finding_removes_and_what_is_left(slow_map_evidence, tmp_path):
    maps = tf.data.Dataset.range(64).map(lambda x: tf.sin(tf.cast(x, tf.float32))).batch(8)
    ctx = slow_map_evidence(maps)
    st = next(s for s in ctx.graph.stages if s.kind == "map")
    assert per_element(ctx, st) is None and fixed_share(ctx, st) == 0.9  # vectorized
    images = tf.data.Dataset.list_files(jpegs(tmp_path / "birds", 2), shuffle=False)
    ctx = slow_map_evidence(images.map(load_jpeg).batch(2))
    st = next(s for s in ctx.graph.stages if s.kind == "map")
    assert per_element(ctx, st).per_element and fixed_share(ctx, st) == 0.0  # stays


def test_a_prefix_costs_its_timed_rate_else_the_sum_of_its_stages(evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: x + 1).map(lambda x: x * 2).batch(8)
    timed = [
        StageTiming(1, "map#1", "map", 500.0, 1000.0),
        StageTiming(2, "map#2", "map", None, 3000.0),
    ]
    ctx = evidence(ds, stages=timed)
    assert prefix_cost(ctx, 1) == pytest.approx(1 / 500)
    assert prefix_cost(ctx, 2) == pytest.approx(4e-3)  # no rate of its own: 1 ms + 3 ms
