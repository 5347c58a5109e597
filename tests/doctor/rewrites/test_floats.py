"""float64 arrays cast to float32 where the pipeline holds them, not only at its output
(doctor/rewrites/floats.py): every float64 of the graph retyped (elements, map functions,
their constants), checked within float32's tolerance against the original in its source's
order; pipelines whose values come from Python or at random are left alone, and a
computation float32 cannot hold fails the check. The rule naming it: rules/test_floats.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.floats import close_values, float32_at_source, float64_constants
from tfperf.doctor.rewrites.gather import batched_gather
from tfperf.doctor.rules.floats import FLOAT32_SOURCE


def _dtypes(ds: tf.data.Dataset) -> set[str]:
    return {t for s in lint.read_graph(ds).stages for t in s.output_dtypes}


def _table(n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(5.0, 2.0, size=(n, 8)), rng.normal(size=n)  # float64, as NumPy gives


def test_a_float64_table_is_computed_in_float32_from_its_source_on():
    x, y = _table()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000)
    ds = ds.map(lambda a, b: ((a - 5.0) / 2.0, b * 0.5)).batch(64).prefetch(2)
    out = float32_at_source(lint.read_graph(ds), ds)
    assert out is not None
    assert "float64" in _dtypes(ds) and "float64" not in _dtypes(out)
    assert [s.dtype for s in tf.nest.flatten(out.element_spec)] == [tf.float32, tf.float32]
    # The map's constants (5.0, 2.0, 0.5) and ops were retyped with it: it runs.
    assert out.doctor_check() is True
    # The arrays and the map's three scalars (5.0, 2.0, 0.5).
    cast = x.size + y.size + 3
    assert (
        out.doctor_note == f"float32 from the source on: {cast:,} float64 constant values cast once"
    )
    first = next(iter(out))
    assert first[0].dtype == tf.float32 and first[0].shape == (64, 8)


def test_the_windows_then_float32_equal_the_original_within_float32():
    data, _ = _table(600)
    ds = keras.utils.timeseries_dataset_from_array(
        data, data[20:, 0], sequence_length=20, batch_size=32, shuffle=False
    )
    windows = batched_gather(lint.read_graph(ds), ds)
    out = float32_at_source(lint.read_graph(windows), windows)
    assert out is not None and "float64" not in _dtypes(out)
    assert close_values(ds, out)  # in order: nothing shuffles
    # Replayed by name, as the module --fix writes does.
    replayed = tfperf.apply_rewrites(ds, ["gather per batch", FLOAT32_SOURCE.label])
    assert close_values(ds, replayed)


def test_values_float32_cannot_hold_fail_the_check():
    # Seconds since 1970 through sin(): float32 keeps ~7 digits of 1.7e9, nothing of its sine.
    t = 1.7e9 + np.arange(500, dtype=np.float64) * 600.0
    ds = tf.data.Dataset.from_tensor_slices(t).map(tf.sin).batch(50)
    out = float32_at_source(lint.read_graph(ds), ds)
    assert out is not None and out.doctor_check() is False


@pytest.mark.parametrize(
    "make",
    [
        # No float64 at all.
        lambda: tf.data.Dataset.from_tensor_slices(np.ones((100, 4), np.float32)).batch(10),
        # Values made in Python: their dtype is Python's to give.
        lambda: (
            tf.data.Dataset.range(100)
            .map(lambda i: tf.numpy_function(lambda v: np.float64(v) / 3, [i], tf.float64))
            .batch(10)
        ),
        # Random values: no pass can be compared with another.
        lambda: (
            tf.data.Dataset.from_tensor_slices(np.ones((100, 4)))
            .map(lambda a: a + tf.random.uniform([4], dtype=tf.float64))
            .batch(10)
        ),
    ],
    ids=["float32", "numpy_function", "random"],
)
def test_pipelines_it_cannot_or_need_not_retype_are_left_alone(make):
    ds = make()
    assert float32_at_source(lint.read_graph(ds), ds) is None


def test_the_float64_values_are_counted_in_the_graph():
    x, y = _table()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    assert float64_constants(lint.read_graph(ds).graph_def) == x.size + y.size
    as32 = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y.astype(np.float32)))
    assert float64_constants(lint.read_graph(as32.batch(64)).graph_def) == 0
