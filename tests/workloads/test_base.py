"""workloads/base.py (and the registry in workloads/__init__.py): a workload's defaults (the
converted schema is the raw one, mse and no metrics, the raw split's name), the binary
workloads' loss and accuracy on logits (a logit above 0 is class 1), and every registered
workload found by its name."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tfperf.config import WORKLOAD_NAMES
from tfperf.data.schema import Feature, Schema
from tfperf.workloads import get_workload
from tfperf.workloads.base import BinaryLogitsWorkload, Workload


class Counting(Workload):
    name = "counting"

    def raw_schema(self) -> Schema:
        return Schema(features=(Feature(name="x", dtype="int64"),))

    def generate(self, n: int, seed: int = 0) -> Iterator[dict]:
        for i in range(n):
            yield {"x": np.int64(i + seed)}


def test_defaults_of_a_workload():
    w = Counting(size=3)
    assert w.options == {"size": 3}
    assert w.schema() == w.raw_schema()  # no offline preprocessing: the same schema
    assert w.offline_preprocess() is None
    assert (w.loss, tuple(w.metrics)) == ("mse", ())
    assert Workload.raw_split("train") == "train_raw"
    assert [int(r["x"]) for r in w.generate(3, seed=5)] == [5, 6, 7]
    with pytest.raises(NotImplementedError):
        Workload().raw_schema()


def test_binary_workloads_score_logits_at_zero():
    w = BinaryLogitsWorkload()
    labels = np.array([[1.0], [0.0], [1.0], [0.0]], dtype="float32")
    logits = np.array([[0.3], [-2.0], [-0.1], [0.5]], dtype="float32")
    (accuracy,) = w.metrics
    accuracy.update_state(labels, logits)
    assert float(accuracy.result()) == 0.5  # right on the first two only
    loss = float(w.loss(labels, logits))
    p = 1 / (1 + np.exp(-logits))
    expected = -np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    assert loss == pytest.approx(expected, rel=1e-5)  # from logits, not probabilities


def test_every_registered_workload_is_found_by_its_name():
    for name in sorted(WORKLOAD_NAMES):
        w = get_workload(name)
        assert isinstance(w, Workload) and w.name == name
    with pytest.raises(ValueError, match="unknown workload 'chase'; expected one of"):
        get_workload("chase")
