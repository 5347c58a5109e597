"""train.jit_compile: `auto` resolves as Keras 3's compile does (a pure table over devices,
strategy and layers), `true` trains the step under XLA and says so, and a step XLA refuses
is an error naming it under `true` and a fallback that says why under `auto`."""

from __future__ import annotations

import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.loop import train
from tfperf.train.step import TrainStep
from tfperf.train.xla import JitChoice, resolve_jit_compile


class NoXla(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_jit = False

    def call(self, x):
        return x


def model_with(*layers: keras.layers.Layer) -> keras.Model:
    x = keras.Input((4,))
    h = x
    for layer in layers:
        h = layer(h)
    return keras.Model(x, keras.layers.Dense(1)(h))


@pytest.mark.parametrize(
    ("setting", "strategy", "devices", "layers", "printing", "on", "reason"),
    [
        ("auto", "one_device", [], [], False, False, "CPU-only host"),
        ("auto", "one_device", ["GPU"], [], False, True, "auto: on (GPU present"),
        ("auto", "mirrored", ["GPU", "GPU"], [], False, False, "mirrored strategy"),
        ("auto", "one_device", ["GPU"], ["no_xla"], False, False, "layer no_xla does not"),
        ("auto", "one_device", ["GPU"], [], True, False, "print_tensors"),
        (True, "one_device", [], [], False, True, "train.jit_compile: true"),
        (True, "one_device", [], [], True, False, "print_tensors"),
        (False, "one_device", ["GPU"], [], False, False, "train.jit_compile: false"),
    ],
)
def test_jit_compile_resolves_as_keras_compile(
    setting, strategy, devices, layers, printing, on, reason
):
    model = model_with(*[NoXla(name=n) for n in layers])
    choice = resolve_jit_compile(setting, model, strategy, devices, printing=printing)
    assert choice.enabled is on
    assert reason in choice.reason


USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

X = np.random.default_rng(0).standard_normal((256, 4)).astype("float32")


def pipeline(training=True):
    return tf.data.Dataset.from_tensor_slices((X, X[:, :1])).batch(32, drop_remainder=True)


def model():
    keras.utils.set_random_seed(0)
    x = keras.Input((4,))
    return keras.Model(x, keras.layers.Dense(1)(keras.layers.Dense(8, "relu")(x)))
"""


def test_jit_compile_true_trains_under_xla_and_reports_it(tmp_path):
    module = f"xla_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    losses = {}
    for setting in (True, False):
        doc = {
            "data": {"pipeline": f"{module}:pipeline"},
            "model": {"name": f"{module}:model", "loss": "mse"},
            "train": {
                "out_dir": str(tmp_path / f"run_{setting}"),
                "max_steps": 6,
                "monitor_system": False,
                "jit_compile": setting,
            },
        }
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
        result = train(load_config(tmp_path / "run.yaml"), progress=False)
        assert result.jit_compile is setting
        assert result.jit_compile_reason == f"train.jit_compile: {str(setting).lower()}"
        losses[setting] = result.final_loss
    # the same steps on the same batches: XLA's arithmetic differs only in rounding
    assert losses[True] == pytest.approx(losses[False], rel=1e-3)


def refused_step(reason: str) -> tuple[TrainStep, tf.data.Iterator]:
    """A step XLA cannot compile on this host: the model calls Python (numpy_function)."""
    keras.utils.set_random_seed(0)
    x = keras.Input((4,))
    py = keras.layers.Lambda(
        lambda t: tf.reshape(tf.numpy_function(lambda a: a * 2, [t], tf.float32), [-1, 4])
    )
    model = keras.Model(x, keras.layers.Dense(1)(py(x)))
    data = np.ones((64, 4), np.float32)
    ds = tf.data.Dataset.from_tensor_slices((data, data[:, :1])).batch(8).repeat()
    step = TrainStep(
        model,
        keras.optimizers.SGD(0.01),
        keras.losses.MeanSquaredError(reduction=None),
        {},
        tf.distribute.get_strategy(),
        tf.Variable(0, dtype=tf.int64),
        jit=JitChoice(True, reason),
    )
    return step, iter(ds)


def test_a_step_xla_refuses_falls_back_under_auto_and_is_an_error_under_true():
    step, it = refused_step("auto: on (GPU present, every layer supports XLA)")
    out = step(it, 2)
    assert np.isfinite(float(out["loss"]))
    assert not step.jit.enabled and step.jit.reason.startswith("auto: off: XLA refused the step")
    step, it = refused_step("train.jit_compile: true")
    with pytest.raises(UserError, match="train.jit_compile: true, but XLA cannot compile"):
        step(it, 2)
