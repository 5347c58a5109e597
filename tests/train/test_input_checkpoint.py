"""A user's data.pipeline that calls Python (numpy_function, py_function, from_generator):
TensorFlow cannot save its iterator, so training runs without train.checkpoint_input
(one warning saying what resume does) and still writes every checkpoint; asking for
checkpoint_input explicitly stops before training, naming train.checkpoint_input=false."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.loop import train
from tfperf.train.run_input import InputCheckpointError

from helpers import trainkit

PIPELINES = """
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 4)).astype("float32")
Y = (X.sum(axis=1) > 0).astype("float32")


def _pairs():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y))


def numpy_function(training, batch_size):
    double = lambda x, y: ({"x": tf.numpy_function(lambda v: v * 2, [x["x"]], tf.float32)}, y)
    ds = _pairs().map(double).map(lambda x, y: ({"x": tf.ensure_shape(x["x"], [4])}, y))
    return ds.repeat().batch(batch_size)


def py_function(training, batch_size):
    double = lambda x, y: ({"x": tf.py_function(lambda v: v * 2, [x["x"]], tf.float32)}, y)
    ds = _pairs().map(double).map(lambda x, y: ({"x": tf.ensure_shape(x["x"], [4])}, y))
    return ds.repeat().batch(batch_size)


def from_generator(training, batch_size):
    def rows():
        for x, y in zip(X, Y):
            yield {"x": x}, y

    spec = ({"x": tf.TensorSpec([4], tf.float32)}, tf.TensorSpec([], tf.float32))
    return tf.data.Dataset.from_generator(rows, output_signature=spec).repeat().batch(batch_size)
"""


def _runfile(tmp_path, kind: str, **train_section) -> str:
    module = f"user_pipes_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(PIPELINES)
    trainkit.write_models(tmp_path)
    doc = {
        "data": {"pipeline": f"{module}:{kind}"},
        "pipeline": {"batch_size": 8},
        "model": {"name": "tinymodels:tiny", "loss": "binary_crossentropy_from_logits"},
        "train": {
            "out_dir": str(tmp_path / "run"),
            "monitor_system": False,
            "steps_per_loop": 1,
            "checkpoint": {"every_steps": 3},
            **train_section,
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("kind", ["numpy_function", "py_function", "from_generator"])
def test_python_pipeline_trains_and_checkpoints_without_the_iterator(tmp_path, capsys, kind):
    rf = _runfile(tmp_path, kind)
    result = train(load_config(rf), max_steps=6, progress=False)
    assert result.steps == 6 and result.stopped_because == "max_steps"
    ckpts = tmp_path / "run" / "checkpoints"
    assert {p.name for p in ckpts.glob("ckpt-*.index")} == {"ckpt-3.index", "ckpt-6.index"}
    assert (ckpts / "FINAL").exists()
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert "cannot save the input iterator" in err and "is stateful" in err
    assert "restarts the input pipeline from its beginning" in err
    assert "train.checkpoint_input=false" in err
    # The checkpoints resume (model, optimizer and step; the input starts over).
    again = train(load_config(rf), max_steps=9, progress=False)
    assert again.start_step == 6 and again.steps == 9


def test_explicit_checkpoint_input_stops_before_training(tmp_path, cli):
    rf = _runfile(tmp_path, "numpy_function", checkpoint_input=True)
    with pytest.raises(InputCheckpointError, match=r"set train.checkpoint_input=false in"):
        train(load_config(rf), max_steps=6, progress=False)
    assert not list((tmp_path / "run" / "checkpoints").glob("ckpt-*"))
    res = cli("train", rf, "--max-steps", "3", "--no-progress")
    assert res.exit_code == 2
    assert "train.checkpoint_input: true" in res.stderr and "PyFunc is stateful" in res.stderr
    assert "Traceback" not in res.output
