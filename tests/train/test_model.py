"""The run file's model, loss, metrics and optimizer (train/model.py): the run file's loss
wins over a compiled model's, which supplies what the run file leaves out; a model.name
that returns no model, or nothing set at all, is a ModelError; the learning rate's linear
warm-up and decay; a batch's features fed as the model's inputs take them; zeros shaped like
a batch; every variable, the optimizer's slots among them, made before the first trace."""

from __future__ import annotations

import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tfperf.config import config_from_dict, load_config
from tfperf.train.model import (
    ModelError,
    adapt_features,
    build_model_and_loss,
    build_model_variables,
    learning_rate_schedule,
    make_optimizer,
    zeros_batch,
)

MODELS = """
import keras


def plain():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1, name="logit")(x))


def compiled():
    m = plain()
    m.compile(optimizer=keras.optimizers.RMSprop(0.003), loss="mse", metrics=["mae"])
    return m


def not_a_model():
    return "a string"
"""


def _cfg(tmp_path, *overrides: str, **model):
    """A run file beside its own module of model factories; `model` is its model section."""
    module = f"model_factories_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(MODELS)
    model = {k: v.replace("MODULE", module) if isinstance(v, str) else v for k, v in model.items()}
    doc = {"data": {"dir": "data", "label": "y"}, "model": model}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    return load_config(str(tmp_path / "run.yaml"), list(overrides))


def test_the_run_files_loss_and_metrics_win_over_the_compiled_models(tmp_path):
    cfg = _cfg(tmp_path, name="MODULE:compiled", loss="mae", metrics=["mse"])
    model, wanted = build_model_and_loss(cfg)
    assert isinstance(model, keras.Model)
    assert (wanted.loss, wanted.loss_where) == ("mae", "model.loss")
    assert wanted.metrics == ["mse"]


def test_a_compiled_model_supplies_loss_metrics_and_optimizer(tmp_path):
    cfg = _cfg(tmp_path, name="MODULE:compiled")
    model, wanted = build_model_and_loss(cfg)
    assert (wanted.loss, wanted.loss_where) == ("mse", "the compiled model's loss")
    assert wanted.metrics == ["mae"]
    assert build_model_and_loss(cfg, metrics=False)[1].metrics is None  # the doctor's
    opt = make_optimizer(cfg, model, total_steps=100)
    assert opt is model.optimizer and float(opt.learning_rate) == pytest.approx(0.003)
    # A learning rate in the run file is the run file's optimizer (adam by default).
    own = make_optimizer(_cfg(tmp_path, name="MODULE:compiled", learning_rate=0.2), model, 100)
    assert type(own).__name__ == "Adam" and float(own.learning_rate) == pytest.approx(0.2)


def test_no_model_or_no_loss_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match=r"model.name: expected 'module:function'"):
        build_model_and_loss(config_from_dict({}))
    with pytest.raises(ModelError, match=r"must return a keras.Model, found str"):
        build_model_and_loss(_cfg(tmp_path, name="MODULE:not_a_model", loss="mse"))
    with pytest.raises(ModelError, match=r"model.loss: expected a Keras loss name"):
        build_model_and_loss(_cfg(tmp_path, name="MODULE:plain"))
    cfg = _cfg(tmp_path, name="MODULE:plain", loss="mse", optimizer="nope")
    model, _ = build_model_and_loss(cfg)
    with pytest.raises(ModelError, match=r"model.optimizer: .* found 'nope'"):
        make_optimizer(cfg, model, 100)


def _rates(schedule, steps) -> list[float]:
    return [float(schedule(tf.constant(s))) for s in steps]


def test_warm_up_then_decay(tmp_path):
    assert learning_rate_schedule(_cfg(tmp_path), 0.1, 100) == 0.1  # constant: a float
    warm = learning_rate_schedule(_cfg(tmp_path, warmup_steps=10), 0.1, 100)
    np.testing.assert_allclose(_rates(warm, [0, 4, 9, 10, 90]), [0.01, 0.05, 0.1, 0.1, 0.1])
    cosine = learning_rate_schedule(_cfg(tmp_path, warmup_steps=10, lr_schedule="cosine"), 0.1, 110)
    # 100 steps of cosine decay after the warm-up: half way at 60, zero at 110.
    np.testing.assert_allclose(_rates(cosine, [4, 10, 60, 110]), [0.05, 0.1, 0.05, 0.0], atol=1e-6)
    exp = learning_rate_schedule(_cfg(tmp_path, lr_schedule="exponential"), 0.1, 50)
    np.testing.assert_allclose(_rates(exp, [0, 50]), [0.1, 0.01], rtol=1e-5)  # x0.1 at the end


def test_features_are_fed_as_the_model_takes_them():
    x = keras.Input(shape=(4,), name="x")
    by_name = keras.Model({"x": x}, keras.layers.Dense(1)(x))
    feats = {"x": tf.ones([2, 4]), "id": tf.constant([1, 2])}
    assert list(adapt_features(by_name, feats)) == ["x"]  # the id is left out
    unnamed = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    assert adapt_features(unnamed, {"pixels": feats["x"]}) is feats["x"]  # a plain tensor
    a, b = keras.Input((2,), name="a"), keras.Input((3,), name="b")
    two = keras.Model([a, b], keras.layers.Concatenate()([a, b]))
    got = adapt_features(two, {"b": tf.ones([1, 3]), "a": tf.zeros([1, 2])})
    assert [t.shape.as_list() for t in got] == [[1, 2], [1, 3]]  # in the inputs' order
    assert adapt_features(by_name, feats["x"]) is feats["x"]  # not a dict: as it is


def test_zeros_batch():
    spec = {"x": tf.TensorSpec([None, 4]), "n": tf.TensorSpec([None, None], tf.int64)}
    zeros = zeros_batch(spec)
    assert zeros["x"].shape == (1, 4) and zeros["n"].shape == (1, 1)
    assert zeros["n"].dtype == tf.int64 and float(tf.reduce_sum(zeros["x"])) == 0.0


def _unbuilt() -> keras.Model:
    return keras.Sequential([keras.layers.Dense(3, name="hidden"), keras.layers.Dense(1)])


def test_every_variable_is_made_before_the_first_trace():
    spec = ({"x": tf.TensorSpec([None, 4])}, tf.TensorSpec([None]))
    strategy = tf.distribute.get_strategy()
    model, opt = _unbuilt(), keras.optimizers.Adam(0.01)
    build_model_variables(strategy, model, opt, spec)
    assert [tuple(w.shape) for w in model.weights] == [(4, 3), (3,), (3, 1), (1,)]
    frozen, frozen_opt = _unbuilt(), keras.optimizers.Adam(0.01)
    seen = []

    def freeze(m):  # as warm start's freeze does: between the model and the optimizer
        m.get_layer("hidden").trainable = False
        seen.append(len(m.trainable_variables))

    build_model_variables(strategy, frozen, frozen_opt, spec, freeze)
    assert seen == [2]
    # Adam's two slots per trainable variable: none for the frozen layer's two.
    assert len(opt.variables) - len(frozen_opt.variables) == 2 * 2
