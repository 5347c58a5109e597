"""The rules about the pipeline's end (rules/pipeline_end.py): no prefetch at the end (input
and train step take turns; the gain is what the cost model allows once they overlap) and
float64 outputs (twice the bytes of float32; the gain measured by the float32-inputs
what-if when it ran). Real datasets' graphs; nothing runs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.rules import PREDICTED_BY, run_rules
from tfperf.doctor.rules.pipeline_end import (
    FLOAT32,
    PREFETCH_END,
    rule_float64,
    rule_no_prefetch,
)


def test_a_pipeline_ending_without_prefetch_gets_the_overlap_as_its_gain(evidence):
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)
    # Input and step taking turns: training at half of what either side gives alone.
    rates = {"pipeline": 1000.0, "compute": 1000.0, "training": 500.0}
    (f,) = rule_no_prefetch(evidence(ds, **rates))
    assert f.code == "no_prefetch" and f.kind == "input"
    assert f.stage.startswith("batch#") and f.stage_index == 2
    assert ".prefetch(tf.data.AUTOTUNE)" in f.change and "pipeline.prefetch: auto" in f.change
    assert f.expected_speedup == pytest.approx(2.0)  # min(pipeline, compute) / training
    # On 2 shared cores with 3 ms of CPU per example for both sides: at most 667 ex/s.
    shared = evidence(ds, **rates, pipeline_cpu=1.5e-3, compute_cpu=1.5e-3, cores=2)
    assert rule_no_prefetch(shared)[0].expected_speedup == pytest.approx(2 / 3e-3 / 500)
    assert PREDICTED_BY[PREFETCH_END.label] == ("no_prefetch",)


def test_a_users_own_pipeline_is_not_told_of_run_file_keys_that_do_not_reach_it(evidence):
    # A data.pipeline function's user set pipeline.prefetch: auto, as advised, and the graph
    # still had no prefetch: those keys shape tfperf's own pipeline only.
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)
    rates = {"pipeline": 1000.0, "compute": 1000.0, "training": 500.0}
    ours = {f.code: f.change for f in run_rules(evidence(ds, **rates))}
    theirs = {f.code: f.change for f in run_rules(evidence(ds, **rates, users_code=True))}
    assert "(run file: pipeline.prefetch: auto)" in ours["no_prefetch"]
    assert theirs["no_prefetch"] == "end the pipeline with .prefetch(tf.data.AUTOTUNE)"
    assert not any("run file:" in change for change in theirs.values()), theirs


@pytest.mark.parametrize(
    "build",
    [
        lambda: tf.data.Dataset.range(64).batch(8).prefetch(tf.data.AUTOTUNE),
        # Options after the prefetch wrap it: the prefetch still ends the pipeline.
        lambda: tf.data.Dataset.range(64).batch(8).prefetch(2).with_options(tf.data.Options()),
    ],
    ids=["prefetch", "prefetch-then-options"],
)
def test_a_pipeline_ending_in_prefetch_gets_none(build, evidence):
    assert rule_no_prefetch(evidence(build())) == []


def test_float64_outputs_are_named_by_their_path(evidence):
    x = np.ones((32, 4))  # float64, as NumPy gives it
    y = np.ones((32, 1), np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    rates = {"pipeline": 5000.0, "compute": 1000.0, "training": 990.0}
    (f,) = rule_float64(evidence(ds, **rates))
    assert f.code == "float64" and f.kind == "data" and f.expected_speedup is None
    assert f.evidence.startswith("float64 outputs: features (twice the bytes")
    assert f.stage_index == len(evidence(ds).graph.stages) - 1  # the output
    # Measured: the compute limit fed float32 inputs.
    (f,) = rule_float64(evidence(ds, **rates, variants={"float32 inputs": 1500.0}))
    assert "with float32 inputs 1,500 ex/s vs 1,000 ex/s" in f.evidence
    assert f.new_compute == 1500.0 and f.expected_speedup == pytest.approx(1.5)
    assert PREDICTED_BY[FLOAT32.label] == ("float64",)


def test_float32_outputs_get_no_float64_finding(evidence):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((32, 4), np.float32)).batch(8)
    assert rule_float64(evidence(ds)) == []
