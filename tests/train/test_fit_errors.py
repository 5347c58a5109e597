"""A user's model and data that do not fit, through `tfperf train`: each mistake is one
paragraph (what was being done, the function or run-file key, expected vs found, where to
change it) and exit status 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

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

    from tfperf.train.fit_check import label_problem

    got = label_problem(kind, tf.TensorShape(out), tf.TensorShape(labels))
    assert got is None if problem is None else problem in got
