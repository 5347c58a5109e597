"""The corpus of public pipelines (tests/doctor/public_pipelines/, issue 19 section 4):
each case names its source, makes its stand-in data, its published pipeline and its
hand-tuned twin yield the same examples, and its model takes a real batch of the published
pipeline as `model.fit` would (forward pass in training mode and the compiled loss).

The doctor's results on these pipelines are measured by benchmarks/bench_doctor_public.py
(too slow for the test suite)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from public_pipelines import cases
from public_pipelines._shared import float32_view

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("public_pipelines")


def test_the_corpus_covers_the_issue():
    assert len(cases.CASES) >= 20
    formats = " ".join(c.FORMAT + " " + c.SOURCE for c in cases.CASES)
    for kind in cases.KINDS:
        assert kind.lower() in formats.lower(), f"no case reads {kind}"
    for case in cases.CASES:
        repo = case.SOURCE.split()[0]
        assert "/" in repo and "keras-io" not in case.SOURCE, case.name
        assert case.name in case.module.__name__
        for attr in ("FLAW", "TWIN", "make_data", "original", "tuned", "model"):
            assert getattr(case.module, attr, None), f"{case.name} has no {attr}"
        assert case.module.__doc__ and repo in case.module.__doc__, case.name


@pytest.mark.parametrize("case", cases.CASES, ids=[c.name for c in cases.CASES])
def test_twin_yields_the_same_examples(case: cases.Case, data_root: Path):
    from tfperf.testing import assert_same_examples

    folder = cases.make(case, data_root)
    kwargs = {"batch_size": case.batch_size, **case.same_kwargs}
    published = case.comparable(float32_view(case.original(folder, **kwargs)))
    twin = case.comparable(float32_view(case.tuned(folder, **kwargs)))
    assert_same_examples(published, twin, limit=case.limit)


@pytest.mark.parametrize("case", cases.CASES, ids=[c.name for c in cases.CASES])
def test_model_takes_a_real_batch(case: cases.Case, data_root: Path):
    """One batch of the published pipeline through the model and its compiled loss, as a
    train step of `model.fit` does."""
    import tensorflow as tf

    folder = cases.make(case, data_root)
    x, y = next(iter(case.original(folder, batch_size=case.batch_size)))
    model = case.model()
    assert model.compiled, f"{case.name}: model() returns a compiled model, as fit needs"
    y_pred = model(x, training=True)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
    assert math.isfinite(float(tf.reduce_sum(loss))), f"{case.name}: loss {loss}"
