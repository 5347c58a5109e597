"""The per-row CSV rule (rules/csv_rows.py), on the Titanic tutorial's make_csv_dataset
(tests/doctor/public_pipelines): CSV rows parsed one at a time are an "input" finding whose
change is code that reads the lines and decodes them per batch, which, pasted, yields the
same examples; its --fix candidate is the rewrite of rewrites/csv_batched.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from public_pipelines import cases

from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.csv_batched import csv_code, find_csv
from tfperf.doctor.rules import PREDICTED_BY
from tfperf.doctor.rules.csv_rows import CSV_BATCHED, rule_per_row_csv
from tfperf.measure import same_examples


# ---- the Titanic tutorial (tests/doctor/public_pipelines) ----------------------------------
@pytest.fixture(scope="module")
def titanic(tmp_path_factory: pytest.TempPathFactory) -> tuple[cases.Case, str]:
    case = cases.BY_NAME["titanic_make_csv"]
    return case, cases.make(case, Path(tmp_path_factory.mktemp("public")))


def test_the_finding_gives_code_that_yields_the_same_examples(titanic, evidence):
    case, folder = titanic
    ds = case.original(folder, case.batch_size)
    graph = lint.read_graph(ds)
    batch = next(s for s in graph.stages if s.kind == "batch")
    timings = [StageTiming(batch.index, batch.label, "batch", 20_000.0, 10.0)]
    rates = {"pipeline": 10_000.0, "compute": 100_000.0, "training": 10_000.0}
    ctx = evidence(ds, **rates, input_bound_fraction=0.9, stages=timings, cores=2)
    (f,) = rule_per_row_csv(ctx)
    assert f.code == "per_row_csv" and f.kind == "input" and f.expected_speedup > 1.2
    assert "10 columns, bad rows skipped (ignore_errors)" in f.evidence
    assert "'survived', 'sex', 'age'" in f.change and "features.pop('survived')" in f.change
    assert PREDICTED_BY[CSV_BATCHED.label] == ("per_row_csv",)
    code = csv_code(find_csv(graph), ds.element_spec)
    assert code in f.change
    scope: dict = {"tf": tf}
    exec(code, scope)  # the code as a user pastes it
    assert same_examples(ds, scope["ds"])


def test_cheap_rows_or_other_sources_get_no_finding(titanic, evidence):
    case, folder = titanic
    ds = case.original(folder, case.batch_size)
    batch = next(s for s in lint.read_graph(ds).stages if s.kind == "batch")
    # The rows up to the batch at 1% of the pipeline's time: nothing worth saying.
    cheap = [StageTiming(batch.index, batch.label, "batch", 1e6, 0.01)]
    assert rule_per_row_csv(evidence(ds, pipeline=10_000.0, stages=cheap)) == []
    assert rule_per_row_csv(evidence(tf.data.Dataset.range(64).batch(8))) == []
