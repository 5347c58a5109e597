"""The per-example gather rule (rules/gather.py), on the Hands-On ML windows of
keras.utils.timeseries_dataset_from_array (tests/doctor/public_pipelines): windows cut one at
a time from arrays in the graph are named first, with tf.gather per batch as the change
(--fix's candidate: rewrites/gather.py), and repeat_before_shuffle no longer fires on Keras'
own repeat; cheap windows get nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from public_pipelines import cases

from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.gather import find_site
from tfperf.doctor.rules import PREDICTED_BY, REWRITES, run_rules
from tfperf.doctor.rules.gather import GATHER, rule_per_example_gather
from tfperf.doctor.rules.order import rule_repeat_before_shuffle


# ---- the rule, on the Hands-On ML windows (tests/doctor/public_pipelines) ------------------
# ---- the rule, on the Hands-On ML windows (tests/doctor/public_pipelines) ------------------
@pytest.fixture(scope="module")
def ridership(tmp_path_factory: pytest.TempPathFactory) -> tf.data.Dataset:
    case = cases.BY_NAME["ridership_mulvar"]
    folder = cases.make(case, Path(tmp_path_factory.mktemp("public")))
    return case.original(folder, case.batch_size)


def test_the_windows_finding_comes_first_and_no_repeat_finding(ridership, evidence):
    graph = lint.read_graph(ridership)
    site = find_site(graph)
    assert site is not None and site.windows and len(site.columns) == 2  # windows, targets
    # Every stage up to the batch 20 us per example, the pipeline 10,000 ex/s (input-bound).
    timings = [
        StageTiming(s.index, s.label, s.kind, 10_000.0, 20.0)
        for s in graph.stages[: site.batch.index + 1]
    ]
    rates = {"pipeline": 10_000.0, "compute": 100_000.0, "training": 10_000.0}
    ctx = evidence(ridership, **rates, input_bound_fraction=0.9, stages=timings, cores=2)
    assert rule_repeat_before_shuffle(ctx) == []  # Keras' from_tensors(array).repeat()
    (f,) = rule_per_example_gather(ctx)
    assert f.code == "per_example_gather" and f.kind == "input"
    assert "timeseries_dataset_from_array" in f.change and "tf.gather" in f.change
    assert f.expected_speedup is not None and f.expected_speedup > 3
    assert run_rules(ctx)[0].code == "per_example_gather"
    # Its rewrite is --fix's candidate under the same label.
    assert REWRITES[GATHER.label] == GATHER
    assert PREDICTED_BY[GATHER.label] == ("per_example_gather",)
    # Cheap stages (1% of the pipeline's time): nothing worth saying.
    cheap = [StageTiming(t.index, t.label, t.kind, 1e6, 0.001) for t in timings]
    assert rule_per_example_gather(evidence(ridership, **rates, stages=cheap)) == []


def test_pipelines_without_windows_get_none(evidence):
    ds = tf.data.Dataset.range(100).map(lambda x: x * 2).batch(10)
    assert rule_per_example_gather(evidence(ds, input_bound_fraction=0.9)) == []


def test_rows_of_a_dataframes_columns_are_named_as_rows(evidence):
    rng = np.random.default_rng(1)
    columns = {f"c{i}": rng.normal(size=(500, 1)) for i in range(12)}
    ds = tf.data.Dataset.from_tensor_slices((columns, rng.integers(0, 2, 500))).batch(25)
    batch = next(s for s in evidence(ds).graph.stages if s.kind == "batch")
    timing = [StageTiming(batch.index, batch.label, "batch", 1000.0, 900.0)]
    rates = {"pipeline": 1000.0, "compute": 10_000.0, "training": 1000.0}
    (f,) = rule_per_example_gather(evidence(ds, stages=timing, **rates))
    assert f.title.startswith("rows sliced one at a time from many arrays")
    assert "13 arrays sliced per example" in f.evidence
    assert f.change.startswith("batch the row numbers and gather each batch")
