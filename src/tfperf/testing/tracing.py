"""`assert_no_retrace`: a tf.function traces only as often as expected over a run of calls
(each new trace costs a graph build; a retrace per step makes training crawl)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tfperf.errors import UserError


def assert_no_retrace(fn: Any, inputs: Iterable[Any], *, traces: int = 1) -> None:
    """Calls the tf.function `fn` on each of `inputs` and asserts it traced at most `traces`
    times in all (1: the first call traces, no later call may; more when you expect one
    trace per distinct input signature). An item of `inputs` that is a tuple is one call's
    positional arguments; any other item is the single argument of one call. Traces made
    before this call (fn already used) are not counted.

    Example:

        def test_train_step_traces_once():
            batches = [next(it) for _ in range(3)]
            tfperf.testing.assert_no_retrace(model.train_step_fn, [(x, y) for x, y in batches])
    """
    count = getattr(fn, "experimental_get_tracing_count", None)
    if count is None:
        raise UserError(
            f"assert_no_retrace: {_name(fn)} is not a tf.function (it has no tracing count): "
            "wrap it with tf.function, or pass the tf.function itself."
        )
    start = count()
    traced: list[tuple[int, str]] = []  # (call index, signature) of each call that traced
    for i, item in enumerate(inputs):
        args = item if isinstance(item, tuple) else (item,)
        before = count()
        fn(*args)
        if count() == before:
            continue
        traced.append((i, describe(args)))
        if count() - start > traces:
            raise AssertionError(_message(fn, i, args, traced, count() - start, traces))


def _message(
    fn: Any, call: int, args: tuple[Any, ...], traced: list[tuple[int, str]], n: int, traces: int
) -> str:
    lines = [
        f"{_name(fn)} traced again at call {call} (counting from 0): {n} traces, at most "
        f"{traces} expected. Its arguments: {describe(args)}.",
        "The calls that traced:",
        *(f"  call {i}: {sig}" for i, sig in traced),
    ]
    if _has_python_scalar(args):
        lines.append(
            "A Python number, bool or string argument is part of the signature: each new value "
            "traces again. Pass it as a tensor (tf.constant(...)) or keep it constant."
        )
    else:
        lines.append(
            "A tensor of a new shape or dtype traces again: give the tf.function an "
            "input_signature with None for the dimension that varies (or reduce_retracing=True), "
            "or keep the shapes fixed (e.g. batch(..., drop_remainder=True))."
        )
    return "\n".join(lines)


def describe(value: Any) -> str:
    """An argument as a signature sees it: a tensor's shape and dtype, a Python value itself."""
    import numpy as np
    import tensorflow as tf

    if isinstance(value, (tf.Tensor, tf.Variable)):
        return f"tf.Tensor(shape={tuple(value.shape)}, dtype={value.dtype.name})"
    if isinstance(value, (tf.RaggedTensor, tf.SparseTensor)):
        # A signature sees their static shape (a ragged dimension is None) and dtype.
        kind = type(value).__name__
        return f"tf.{kind}(shape={tuple(value.shape)}, dtype={value.dtype.name})"
    if isinstance(value, np.ndarray):
        return f"np.ndarray(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, (bool, int, float, str, bytes)) or value is None:
        return f"Python {type(value).__name__} {value!r}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return type(value).__name__


def _has_python_scalar(value: Any) -> bool:
    if isinstance(value, (bool, int, float, str, bytes)):
        return True
    if isinstance(value, dict):
        return any(_has_python_scalar(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(_has_python_scalar(v) for v in value)
    return False


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__
