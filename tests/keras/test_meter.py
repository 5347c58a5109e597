"""keras/meter: `monitor(ds)` yields the same elements with the consumer's wait for each
batch summed inside tf.data (a clock zipped to the pipeline's end), counting batches and
examples of dense, ragged, sparse and scalar elements; readings subtract."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from tfperf.keras.meter import (
    InputMeter,
    MeterReading,
    batch_rows,
    ends_with_prefetch,
    monitor,
    recent_meters,
)


def test_monitor_yields_the_same_elements_and_rejects_what_is_not_a_dataset():
    ds = tf.data.Dataset.range(10).batch(3)
    meter = InputMeter()
    out = monitor(ds, meter)
    assert [list(b.numpy()) for b in out] == [list(b.numpy()) for b in ds]
    assert meter in recent_meters()
    assert (meter.read().batches, meter.read().examples) == (4, 10)
    with pytest.raises(TypeError, match="expected a tf.data.Dataset, got ndarray"):
        monitor(np.zeros(3))


def test_ragged_and_sparse_batches_count_their_rows():
    ragged = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3], [4, 5, 6]]))
    meter = InputMeter()
    out = list(monitor(ragged.batch(2), meter))
    assert [r.to_list() for r in out] == [[[1, 2], [3]], [[4, 5, 6]]]
    assert (meter.read().batches, meter.read().examples) == (2, 3)
    sparse = tf.sparse.from_dense(tf.constant([[0, 1], [2, 0], [0, 0]]))
    assert float(batch_rows(sparse)) == 3.0
    assert float(batch_rows({"a": tf.zeros([5, 2]), "b": tf.zeros([5])})) == 5.0
    assert float(batch_rows(tf.constant(7))) == 1.0  # an unbatched scalar is one example


def test_the_wait_for_slow_batches_is_measured():
    def nap(x):
        time.sleep(0.02)
        return x

    slow = tf.data.Dataset.range(6).map(lambda x: tf.numpy_function(nap, [x], tf.int64))
    meter = InputMeter()
    before = meter.read()
    for _ in monitor(slow.batch(2), meter):
        pass
    waited = meter.read() - before
    assert waited.batches == 3 and waited.examples == 6
    # the loop asks at once: most of the naps' 0.12 s are waited for, behind the prefetch
    assert waited.wait_s > 0.02 * 6 * 0.5


def test_a_final_prefetch_is_found_through_options_and_added_when_missing():
    ds = tf.data.Dataset.range(4)
    assert not ends_with_prefetch(ds.batch(2))
    assert ends_with_prefetch(ds.prefetch(1).with_options(tf.data.Options()))
    # the monitored pipeline's own input: the prefetch tf.data would have injected
    inner = monitor(ds.batch(2))._input_dataset._input_dataset._datasets[1]
    assert ends_with_prefetch(inner)


def test_readings_subtract_field_by_field():
    assert MeterReading(3.0, 5, 50) - MeterReading(1.0, 2, 20) == MeterReading(2.0, 3, 30)
