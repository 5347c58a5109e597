"""The model checked against its data before the first step (train/fit_check.py): the
batches' (features, labels) split, the model run on zeros or, where zeros made from static
shapes cannot stand in (windows of unknown length from keras.utils.
timeseries_dataset_from_array, string features fed to a StringLookup), on one real batch,
and its output against the labels by compile's shape rules. Through `tfperf train` (the
command line in this process) each mistake is one paragraph (what was being done, the
function or run-file key, expected vs found, where to change it) and exit status 2, never a
traceback; a model that really does not fit the real batch gets Keras' own message with the
batch's real shape, and pipelines that fit train as `model.fit` would."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.fit_check import FitError, label_problem, needs_real_batch, split_batch
from tfperf.train.loop import train

from helpers import trainkit

BAD_CODE = """
import keras
import tensorflow as tf


def raises():
    raise ValueError("hidden_units must be positive")


def five_classes():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(5, activation="softmax")(x))


def pixels():
    x = keras.Input(shape=(4,), name="pixels")
    return keras.Model({"pixels": x}, keras.layers.Dense(1)(x))


def broken_pipeline(training, batch_size):
    return tf.data.Dataset.range(10).batch(batch_size).map(undefined_name)


def x_only():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1)(x))


def unbatched(training, batch_size):
    return tf.data.Dataset.from_tensor_slices(({"x": tf.zeros([32, 4])}, tf.zeros([32])))
"""


@pytest.fixture
def runfile(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=32)
    (tmp_path / "badcode.py").write_text(BAD_CODE)
    (tmp_path / "blocker").write_text("a file where a folder should be\n")
    return str(trainkit.write_runfile(tmp_path, data, max_steps=2))


CASES = [
    (
        "model_raises",
        ["model.name=badcode:raises"],
        [
            "model.name: building the model, badcode:raises raised ValueError: "
            "hidden_units must be positive",
            "badcode.py, line 7, in raises",
            "run.yaml",
        ],
    ),
    (
        "output_vs_labels",
        ["model.name=badcode:five_classes"],
        [
            "model.loss: checking the model against the data, model output (8, 5) vs labels "
            "(8,) for 'binary_crossentropy_from_logits'",
            "use sparse_categorical_crossentropy",
            "change model.loss in",
            "badcode.py",
        ],
    ),
    (
        "broadcast_mse_vs_labels",  # (8, 5) - (8, 1) would broadcast silently
        ["model.name=badcode:five_classes", "model.loss=mse"],
        [
            "model output (8, 5) vs labels (8,) for 'mse'",
            "change model.loss in --set model.loss=mse",  # where the value came from
        ],
    ),
    (
        "inputs_vs_features",
        ["model.name=badcode:pixels"],
        [
            "model.name: calling the model on one batch of the features failed: its inputs "
            "['pixels'] expecting (None, 4) vs the features {'id': (8,), 'x': (8, 4)} "
            "(data.label 'y' removed)",
            "name each keras.Input after the feature it takes",
            "badcode.py",
        ],
    ),
    (
        "unbatched_pipeline",  # a pipeline without .batch(): the model gets single examples
        ["data.pipeline=badcode:unbatched", "model.name=badcode:x_only"],
        [
            "its inputs ['x'] expecting (None, 4) vs the features {'x': (4,)}",
            "badcode:unbatched yields single examples; end it with .batch(batch_size)",
        ],
    ),
    (
        "no_label",
        ["data.label=null"],
        [
            "data.label: training needs to know which feature is the label, found nothing set",
            "one of ['id', 'x', 'y']",
        ],
    ),
    (
        "pipeline_raises",
        ["data.pipeline=badcode:broken_pipeline"],
        [
            "data.pipeline: building the training dataset, badcode:broken_pipeline raised "
            "NameError",
            "badcode.py, line 21, in broken_pipeline",
        ],
    ),
    (
        "out_dir_under_a_file",
        ["train.out_dir=blocker/run"],
        [
            "train.out_dir: making the run's folder",
            "blocker is a file",
            "change train.out_dir in --set train.out_dir=blocker/run",
        ],
    ),
]


@pytest.mark.parametrize(("sets", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mistake_is_one_paragraph_and_exit_2(runfile, cli, sets, expected):
    args = ["train", runfile, "--no-progress"]
    for item in sets:
        args += ["--set", item]
    res = cli(*args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    for part in expected:
        assert part in line, line
    if "train.out_dir" not in line:  # the run's folder holds no checkpoint
        assert not list((Path(runfile).parent / "run").glob("checkpoints/ckpt-*"))


@pytest.mark.parametrize(
    ("kind", "out", "labels", "problem"),
    [
        ("same", (None, 1), (None,), None),  # [B] labels for [B, 1]: compile adds the axis
        ("same", (None,), (None, 1), None),  # and Keras's losses drop a trailing 1
        ("same", (None, 5), (None, 1), "sparse_categorical_crossentropy"),  # would broadcast
        ("same", (None, 1), (None, 5), "last layer 5 units"),
        ("sparse", (None, 5), (None,), None),
        ("sparse", (None, 5), (None, 5), "categorical_crossentropy"),
        ("sparse", (None, 1), (None,), "binary_crossentropy"),
        ("sparse", (None, 8, 8, 3), (None, 8, 8), None),  # per-pixel classes
        ("auto", (None, 1), (None,), None),  # binary
        ("auto", (None, 3), (None,), None),  # sparse
        ("auto", (None, 3), (None, 3), None),  # one-hot
        ("auto", (None, 3), (None, 4), "match the labels"),
        ("any", (None, 3), (None, 7), None),  # the user's own function: not judged
        ("same", (None, None, 3), (None, None, 3), None),  # known only when it runs
        ("sparse", (None, 1, 3), (None,), "1 more axis per example"),  # a sequence axis left
        ("auto", (None, 1, 3), (None,), "GlobalAveragePooling1D"),
        ("same", (None, 10, 1), (None,), "2 more axes per example"),
    ],
)
def test_label_problem_follows_compiles_shape_rules(kind, out, labels, problem):
    import tensorflow as tf

    got = label_problem(kind, tf.TensorShape(out), tf.TensorShape(labels))
    assert got is None if problem is None else problem in got


def test_split_batch_takes_pairs_and_names_the_label_setting(runfile):
    import tensorflow as tf

    x, y = tf.TensorSpec([None, 4]), tf.TensorSpec([None])
    cfg = load_config(runfile, [])
    assert split_batch(cfg, (x, y)) == (x, y)
    with pytest.raises(FitError, match=r"set data.label to one of \['id', 'x'\]"):
        split_batch(cfg, {"x": x, "id": y})
    piped = load_config(runfile, ["data.pipeline=badcode:unbatched"])
    with pytest.raises(FitError, match=r"badcode:unbatched yields \(8, 4\); return ds.map"):
        split_batch(piped, x)


def test_needs_real_batch_where_zeros_cannot_stand_in():
    import tensorflow as tf

    assert not needs_real_batch(({"x": tf.TensorSpec([None, 4])}, tf.TensorSpec([None])))
    assert needs_real_batch(tf.TensorSpec([None, None, 7]))  # windows of unknown length
    assert needs_real_batch({"city": tf.TensorSpec([None], tf.string)})
    assert needs_real_batch(tf.RaggedTensorSpec([None, None], tf.int64))
    assert needs_real_batch(tf.TensorSpec(None))  # unknown rank


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
