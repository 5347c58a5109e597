"""The model is checked against one real batch of the pipeline where zeros made from static
shapes cannot stand in for one: windows of unknown length (keras.utils.
timeseries_dataset_from_array gives (None, None, 7)), string features fed to a StringLookup.
`model.fit` trains on both, so `tfperf train` must; a model that really does not fit gets
Keras' own message with the batch's real shape."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.loop import train

USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(0)
SERIES = RNG.normal(size=(400, 7))  # float64, as a pandas frame gives


def windows(training=True, batch_size=16):
    return keras.utils.timeseries_dataset_from_array(
        SERIES, SERIES[30:, 0], sequence_length=30, batch_size=16
    )


def lstm():
    x = keras.Input((30, 7))
    return keras.Model(x, keras.layers.Dense(1)(keras.layers.LSTM(4)(x)))


def wrong_length():
    x = keras.Input((20, 7))
    return keras.Model(x, keras.layers.Dense(1)(keras.layers.Flatten()(x)))


CITY = np.array(["paris", "oslo", "rome"] * 40)
VALUE = RNG.normal(size=120).astype("float32")


def strings(training=True, batch_size=16):
    features = {"city": CITY, "value": VALUE}
    return tf.data.Dataset.from_tensor_slices((features, (VALUE > 0).astype("float32"))).batch(16)


def lookup():
    city = keras.Input((), dtype="string", name="city")
    value = keras.Input((), name="value")
    onehot = keras.layers.StringLookup(vocabulary=["paris", "oslo", "rome"], output_mode="one_hot")
    x = keras.layers.Concatenate()([onehot(city), keras.layers.Reshape((1,))(value)])
    return keras.Model({"city": city, "value": value}, keras.layers.Dense(1, "sigmoid")(x))
"""


def write_run(tmp_path, pipeline: str, model: str, loss: str) -> str:
    module = f"real_batch_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    doc = {
        "data": {"pipeline": f"{module}:{pipeline}"},
        "model": {"name": f"{module}:{model}", "loss": loss},
        "train": {"out_dir": str(tmp_path / "run"), "max_steps": 3, "monitor_system": False},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "run.yaml")


@pytest.mark.parametrize(
    ("pipeline", "model", "loss"),
    [("windows", "lstm", "mse"), ("strings", "lookup", "binary_crossentropy")],
    ids=["timeseries_windows", "string_lookup"],
)
def test_pipelines_zeros_cannot_stand_in_for_train(tmp_path, pipeline, model, loss):
    result = train(load_config(write_run(tmp_path, pipeline, model, loss)), progress=False)
    assert result.steps == 3 and result.final_loss == result.final_loss  # finite, not NaN
    assert result.global_batch == 16


def test_a_model_that_does_not_fit_the_real_batch_quotes_keras_and_the_real_shape(tmp_path, cli):
    res = cli("train", write_run(tmp_path, "windows", "wrong_length", "mse"), "--no-progress")
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "expecting (None, 20, 7)" in line, line
    assert "(16, 30, 7) (a real batch)" in line, line
    assert "expected shape=(None, 20, 7), found shape=(16, 30, 7)" in line, line  # Keras' words
