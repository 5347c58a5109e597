"""A run's model, optimizer, step counter and train function (train/parts.py) built on tiny
real data: calls of the train function advance the step and return Python floats, with or
without the metrics; an input that runs out before the end is one error naming
pipeline.repeat; a precision the run file sets is taken as it is, not measured."""

from __future__ import annotations

import math

import pytest
import tensorflow as tf

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.parts import build_train_parts, pick_precision, run_call
from tfperf.train.run_input import dataset_fn, element_spec
from tfperf.train.strategy import StrategyInfo

from helpers import trainkit


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    data = trainkit.write_data(root / "data", n=32, shards=1)
    rf = trainkit.write_runfile(root, data, model="tinymodels:tiny_compiled")
    return load_config(str(rf), ["model.metrics=[binary_accuracy]"])


@pytest.fixture(scope="module")
def info():
    return StrategyInfo(tf.distribute.get_strategy(), "one_device", 1)


@pytest.fixture(scope="module")
def parts(cfg, info):
    """The run's parts with the metrics (one build and trace for the tests that call it)."""
    return build_train_parts(cfg, info, "float32", element_spec(cfg), total=10)


def _input(cfg, batches: int | None = None):
    ds = dataset_fn(cfg)(tf.distribute.InputContext())
    return iter(ds.take(batches) if batches else ds)


def test_calls_advance_the_step_and_return_floats(cfg, info, parts):
    assert parts.model.built and parts.optimizer.built
    assert float(parts.optimizer.learning_rate) == pytest.approx(0.05)  # the run file's
    it, start = _input(cfg), int(parts.step_var.numpy())
    first = run_call(info, parts.train_step, it, 2)
    second = run_call(info, parts.train_step, it, 3)
    assert int(parts.step_var.numpy()) == start + 5
    assert set(first) == {"loss", "wait_s", "examples", "metrics/binary_accuracy"}
    assert all(
        isinstance(v, float) and math.isfinite(v) for v in [*first.values(), *second.values()]
    )
    assert 0.0 <= second["metrics/binary_accuracy"] <= 1.0


def test_the_bare_step_has_no_metrics(cfg, info):
    parts = build_train_parts(cfg, info, "float32", element_spec(cfg), None, metrics=False)
    assert set(run_call(info, parts.train_step, _input(cfg), 1)) == {"loss", "wait_s", "examples"}


def test_the_bare_step_never_reads_the_metrics(cfg, info, tmp_path):
    """The doctor's step: a model compiled with metrics it does not need (a stateful AUC, and
    one Keras cannot even resolve) builds and runs; with metrics the AUC is logged."""
    (tmp_path / "auc_models.py").write_text(
        "import keras\n"
        "def build():\n"
        "    x = keras.Input((4,), name='x')\n"
        "    m = keras.Model({'x': x}, keras.layers.Dense(1, name='logit')(x))\n"
        "    m.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True),\n"
        "              metrics=[keras.metrics.AUC(from_logits=True), 'no_such_metric'])\n"
        "    return m\n"
    )
    (tmp_path / "run.yaml").write_text(cfg.source and open(cfg.source).read())
    own = load_config(str(tmp_path / "run.yaml"), ["model.name=auc_models:build"])
    parts = build_train_parts(own, info, "float32", element_spec(own), None, metrics=False)
    assert set(run_call(info, parts.train_step, _input(own), 1)) == {"loss", "wait_s", "examples"}
    with_auc = load_config(
        str(tmp_path / "run.yaml"), ["model.name=auc_models:build", "model.metrics=[auc]"]
    )
    parts = build_train_parts(with_auc, info, "float32", element_spec(with_auc), None)
    out = run_call(info, parts.train_step, _input(with_auc), 2)
    assert (
        set(out) == {"loss", "wait_s", "examples", "metrics/auc"}
        and 0.0 <= out["metrics/auc"] <= 1.0
    )


def test_an_input_that_runs_out_names_pipeline_repeat(cfg, info, parts):
    with pytest.raises(UserError, match=r"the input ran out at step \d+, before train.max_steps"):
        run_call(info, parts.train_step, _input(cfg, batches=2), 3)


def test_a_set_precision_is_not_measured(cfg, info):
    choice = pick_precision(
        load_config(cfg.source, ["train.precision=mixed_bfloat16"]), info, None, None
    )
    assert (choice.policy, choice.measured) == ("mixed_bfloat16", False)
