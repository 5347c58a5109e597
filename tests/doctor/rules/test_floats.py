"""The float64-source rule (rules/floats.py): float64 arrays held in the graph (NumPy's default
dtype) are an "input" finding naming how many values and the cast to make where the arrays
are built; a few float64 scalars are no array to cast. Its --fix candidate is the rewrite of
rewrites/floats.py."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfperf.doctor.rules import PREDICTED_BY
from tfperf.doctor.rules.floats import FLOAT32_SOURCE, rule_float64_source


def _table(n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(5.0, 2.0, size=(n, 8)), rng.normal(size=n)  # float64, as NumPy gives


def test_the_rule_names_the_float64_arrays(evidence):
    x, y = _table()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    (f,) = rule_float64_source(evidence(ds))
    assert f.code == "float64_source" and f.kind == "input"
    assert f"{x.size + y.size:,} float64 values" in f.evidence
    assert "np.asarray(array, np.float32)" in f.change
    assert PREDICTED_BY[FLOAT32_SOURCE.label] == ("float64_source",)
    small = tf.data.Dataset.from_tensor_slices(np.ones(10)).batch(5)  # 10 values: no array
    assert rule_float64_source(evidence(small)) == []
    as32 = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y)).batch(64)
    assert rule_float64_source(evidence(as32))[0].evidence.startswith(
        f"the pipeline holds {y.size:,}"
    )
