"""Class indices past the model's output units (labels 0-2, a 2-unit softmax): one paragraph
naming the labels' range, the units and both places to change, whether the first batch shows
it (checked before training) or a later one does (TensorFlow's own error, read back)."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.label_range import explain, from_kernel_error, label_span, out_of_range
from tfperf.train.loop import train

USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

X = np.random.default_rng(0).random((96, 4)).astype("float32")


def three_classes(training=True, batch_size=16):
    y = np.arange(96) % 3  # every batch holds 0, 1 and 2
    return tf.data.Dataset.from_tensor_slices((X, y)).batch(16)


def third_class_late(training=True, batch_size=16):
    y = np.where(np.arange(96) < 48, np.arange(96) % 2, 2)  # class 2 from the fourth batch
    return tf.data.Dataset.from_tensor_slices((X, y)).batch(16)


def two_units():
    x = keras.Input((4,))
    return keras.Model(x, keras.layers.Dense(2, activation="softmax")(x))
"""


def write_run(tmp_path, pipeline: str, loss: str, steps: int = 3) -> str:
    module = f"classes_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    doc = {
        "data": {"pipeline": f"{module}:{pipeline}"},
        "model": {"name": f"{module}:two_units", "loss": loss, "metrics": ["accuracy"]},
        "train": {"out_dir": str(tmp_path / "run"), "max_steps": steps, "monitor_system": False},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "run.yaml")


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "crossentropy"])
def test_the_first_batch_past_the_units_is_refused_before_training(tmp_path, loss):
    with pytest.raises(UserError) as err:
        train(load_config(write_run(tmp_path, "three_classes", loss)), progress=False)
    text = str(err.value)
    assert text.startswith("model.loss:"), text
    assert "the first batch holds labels 0..2 (so at least 3 classes)" in text, text
    assert "last layer has 2 units (classes 0..1)" in text, text
    assert "give the model's last layer 3 units" in text and "two_units" in text, text
    assert "third_class_late" not in text and "three_classes" in text, text
    assert not (tmp_path / "run" / "checkpoints").exists() or not any(
        (tmp_path / "run" / "checkpoints").iterdir()
    )


def test_a_later_batch_past_the_units_gets_the_same_paragraph(tmp_path, cli):
    res = cli(
        "train",
        write_run(tmp_path, "third_class_late", "sparse_categorical_crossentropy", steps=5),
        "--no-progress",
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "a training batch holds label 2" in line, line
    assert "last layer has 2 units" in line and "third_class_late" in line, line


def test_label_span_reads_whole_numbers_only():
    assert label_span([0, 2, 1]) == (0, 2)
    assert label_span([[1.0], [3.0]]) == (1, 3)
    assert label_span([0.5, 1.0]) is None  # soft labels: not class indices
    assert label_span(["a"]) is None
    assert out_of_range((0, 2), 2) and out_of_range((-1, 0), 2) and not out_of_range((0, 1), 2)


def test_negative_labels_ask_for_a_shift():
    text = explain("model.loss", "sce", (-1, 1), 3, "the first batch", "m:f", "d:p")
    assert "class indices start at 0: shift the labels in d:p" in text


def test_the_kernel_message_is_read_back():
    msg = "Received a label value of 7 which is outside the valid range of [0, 5).  Label values"
    assert from_kernel_error(ValueError(msg)) == (7, 5)
    assert from_kernel_error(ValueError("something else")) is None
