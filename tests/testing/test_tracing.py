"""tfperf.testing.assert_no_retrace: a tf.function traces only as often as expected; the
message names the call that retraced and its signature."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.errors import UserError
from tfperf.testing import assert_no_retrace


def _step():
    @tf.function
    def step(x, scale):
        return tf.reduce_sum(x) * tf.cast(scale, tf.float32)

    return step


def test_tensor_arguments_of_one_signature_trace_once():
    batches = [(tf.constant([1.0, 2.0]), tf.constant(s)) for s in (1, 2, 3)]
    assert_no_retrace(_step(), batches)


def test_python_ints_retrace_and_the_call_is_named():
    x = tf.constant([1.0, 2.0])
    with pytest.raises(AssertionError) as err:
        assert_no_retrace(_step(), [(x, 2), (x, 2), (x, 3)])
    msg = str(err.value)
    assert "step traced again at call 2 (counting from 0): 2 traces, at most 1 expected" in msg
    assert "(tf.Tensor(shape=(2,), dtype=float32), Python int 3)" in msg
    assert "call 0: (tf.Tensor(shape=(2,), dtype=float32), Python int 2)" in msg
    assert "Pass it as a tensor (tf.constant(...))" in msg


def test_a_new_shape_retraces_unless_expected():
    step = _step()
    calls = [(tf.ones([4]), tf.constant(1)), (tf.ones([3]), tf.constant(1))]
    with pytest.raises(AssertionError, match=r"(?s)call 1 .*shape=\(3,\).*input_signature"):
        assert_no_retrace(step, calls)
    # One trace per shape was expected: the shape-3 trace now exists, and counts from here.
    assert_no_retrace(step, calls + [(tf.ones([5]), tf.constant(1))], traces=1)


def test_a_plain_function_is_a_user_error():
    with pytest.raises(UserError, match="is not a tf.function"):
        assert_no_retrace(lambda x: x, [1])


def test_ragged_and_sparse_arguments_are_described_by_shape_and_dtype():
    fn = tf.function(lambda x: x)
    with pytest.raises(AssertionError) as err:
        assert_no_retrace(fn, [tf.ragged.constant([[1]]), tf.ragged.constant([[1.0]])])
    assert "call 1: (tf.RaggedTensor(shape=(1, None), dtype=float32))" in str(err.value)
    sparse = [tf.sparse.SparseTensor([[0, i]], [i], [1, 5]) for i in range(3)]
    assert_no_retrace(tf.function(tf.sparse.reduce_sum), sparse)
    with pytest.raises(AssertionError, match=r"tf.SparseTensor\(shape=\(1, 6\), dtype=int32\)"):
        assert_no_retrace(fn, [*sparse, tf.sparse.SparseTensor([[0, 0]], [1], [1, 6])])
