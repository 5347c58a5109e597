"""The compiled multi-step train function (train/step.py) on a one-Dense model and small
batches: one call of n steps returns the mean loss and metrics of its batches and the input
wait, and applies the optimizer's update a gradient by hand gives; a new iterator of the same
spec or another step count does not retrace, a changed input is an error naming it; the
signature a retrace is described by; --print-tensors names the layers there are."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.errors import UserError
from tfperf.train.step import RetraceError, TrainStep, describe_signature, signature_diff


def _model() -> keras.Model:
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1, kernel_initializer="zeros", name="out")(x))


def _train_step(model: keras.Model, lr: float = 0.1, **kw) -> TrainStep:
    opt = keras.optimizers.SGD(lr)
    opt.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    metrics = {"mae": keras.losses.mean_absolute_error}
    strategy = tf.distribute.get_strategy()
    return TrainStep(model, opt, keras.losses.mean_squared_error, metrics, strategy, step, **kw)


def _batches(x: np.ndarray, y: np.ndarray, batch: int = 8):
    ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
    return iter(ds.batch(batch, drop_remainder=True).repeat())


def test_one_step_is_the_mean_loss_and_the_update_of_its_gradient():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4)).astype("float32")
    y = rng.normal(size=(8, 1)).astype("float32")
    model = _model()
    ts = _train_step(model, lr=0.1)
    out = ts(_batches(x, y), 1)
    # Zero weights predict 0: the loss is mean(y^2), mae mean(|y|).
    assert float(out["loss"]) == pytest.approx(float((y**2).mean()), rel=1e-5)
    assert float(out["metrics/mae"]) == pytest.approx(float(np.abs(y).mean()), rel=1e-5)
    assert float(out["wait_s"]) >= 0.0
    # d/dw mean((xw - y)^2) at w = 0 is -2/B x^T y; SGD steps against it.
    kernel = model.get_layer("out").kernel.numpy()
    np.testing.assert_allclose(kernel, 0.1 * 2 / 8 * x.T @ y, rtol=1e-4, atol=1e-6)
    assert int(ts.step_var.numpy()) == 1


def test_retrace_is_an_error_naming_the_changed_input():
    ts = _train_step(_model())

    def batches(dtype):
        return _batches(np.zeros((32, 4), dtype), np.zeros((32, 1), "float32"))

    ts(batches("float32"), 2)
    ts(batches("float32"), 3)  # a new iterator of the same spec and another count: no retrace
    assert ts.traces == 1 and int(ts.step_var.numpy()) == 5
    with pytest.raises(RetraceError, match=r"batch/features/x: float32 \(8, 4\) -> float64"):
        ts(batches("float64"), 1)


def test_the_signature_names_every_input_by_its_path():
    spec = ({"x": tf.TensorSpec([8, 4], tf.float32)}, tf.TensorSpec([8], tf.int64))

    class Iterator:
        element_spec = spec

    sig = describe_signature(Iterator(), tf.constant(5, tf.int32))
    assert sig == {
        "batch/features/x": "float32 (8, 4)",
        "batch/labels": "int64 (8,)",
        "num_steps": "int32 ()",
    }
    assert describe_signature(object(), 3) == {"num_steps": "python int 3"}
    changed = {**sig, "batch/labels": "int64 (7,)", "batch/features/id": "int64 (8,)"}
    assert signature_diff(sig, changed) == (
        "batch/features/id: (absent) -> int64 (8,); batch/labels: int64 (8,) -> int64 (7,)"
    )
    assert signature_diff(sig, sig).startswith("no input changed")


def test_print_tensors_names_the_layers_there_are():
    with pytest.raises(UserError, match=r"--print-tensors: no layer 'hidden'; expected one of"):
        _train_step(_model(), print_tensors=["hidden"])
    assert _train_step(_model(), print_tensors=["out", "loss"]).print_names == ["out", "loss"]


def test_a_call_counts_the_rows_of_its_batches_a_partial_one_too():
    """19 examples in batches of 8: 8, 8 and 3 rows, as a pipeline without drop_remainder
    ends its epoch; a count of full batches would say 24 (the doctor's training rate read
    1.6x too fast on 40 images in batches of 32)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(19, 4)).astype("float32")
    y = rng.normal(size=(19, 1)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8).repeat()
    out = _train_step(_model())(iter(ds), 3)
    assert float(out["examples"]) == 19
