"""tfperf.testing.assert_pipeline_faster: paired, interleaved repeats through tfperf.measure;
a pipeline that waits 1 ms per batch beats one that waits 1 ms per example, and the reverse
fails with the ratios. Waiting, not computing, makes the 16x gap hold on a loaded machine:
the test checks the assertion's logic, not TensorFlow's speed."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

from tfperf.errors import UserError
from tfperf.testing import assert_pipeline_faster


def _wait(x):
    """1 ms of waiting per call, whatever the call's element holds."""

    def sleep(t):
        time.sleep(0.001)
        return t

    return tf.py_function(sleep, [x], x.dtype)


def _pipelines():
    base = tf.data.Dataset.range(2048)
    slow = base.map(_wait).batch(16)  # 16 waits per batch
    fast = base.batch(16).map(_wait)  # one wait per batch
    return slow, fast


def test_one_wait_per_batch_is_faster_and_the_reverse_fails():
    slow, fast = _pipelines()
    # Few, short repeats: the 16x gap shows in any of them (the defaults time 20 batches).
    c = assert_pipeline_faster(slow, fast, batches=4, warmup=1, repeats=3, min_seconds=0.05)
    assert c.faster and min(c.ratios) > 1.0
    with pytest.raises(AssertionError) as err:
        assert_pipeline_faster(fast, slow, batches=4, warmup=1, repeats=3, min_seconds=0.05)
    msg = str(err.value)
    # "slower", or "same" when a loaded host stalls one repeat of the fast side (seen once
    # beside other work: ratios 1.04, 0.5, 0.6): either way the reverse fails, with ratios.
    assert "b is not faster than a beyond the noise (verdict: s" in msg
    assert "Paired ratios of examples/s, b / a, one per repeat: " in msg
    assert "median 0." in msg and "examples/s" in msg


def test_elements_of_different_kinds_are_a_user_error():
    ds = tf.data.Dataset.range(10)
    with pytest.raises(UserError, match="rank 0 and 1"):
        assert_pipeline_faster(ds, ds.batch(2))
