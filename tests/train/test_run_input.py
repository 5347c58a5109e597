"""The training input (train/run_input.py): whether TensorFlow can save the iterator (a
stage that runs Python or draws stateful random numbers cannot), the first real batch pulled
once, a record's mean size, the input reseeded by the step on a resume without it, the
service epochs counted only where they can be. A user's data.pipeline that calls Python
(numpy_function, py_function, from_generator) trains without train.checkpoint_input (one
warning saying what resume does) and still writes every checkpoint; asking for
checkpoint_input explicitly stops before training, naming train.checkpoint_input=false."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.loop import train
from tfperf.train.run_input import (
    InputCheckpointError,
    epoch_counter,
    first_of,
    input_seeded_by_step,
    mean_record_bytes,
    save_problem,
    stateful_reason,
)
from tfperf.train.strategy import StrategyInfo

from helpers import trainkit


def test_stateful_reason_names_the_op_tensorflow_cannot_save():
    assert stateful_reason([], generator=True) == (
        "Dataset.from_generator runs Python (PyFunc is stateful)"
    )
    reason = stateful_reason(["MapDataset", "EagerPyFunc"])
    assert reason == "tf.py_function / tf.numpy_function runs Python (EagerPyFunc is stateful)"
    assert stateful_reason(["MapDataset", "RandomUniform"]) == "RandomUniform is stateful"
    # Dataset ops, stateless random numbers, asserts and calls are saved.
    assert stateful_reason(["MapDataset", "StatelessRandomUniformV2", "Assert"]) is None
    assert stateful_reason(["StatefulPartitionedCall", "AddV2"]) is None


def test_save_problem_saves_the_iterator_once():
    import tensorflow as tf

    assert save_problem(iter(tf.data.Dataset.range(8).shuffle(4, seed=1))) is None
    python = tf.data.Dataset.range(8).map(lambda x: tf.numpy_function(lambda v: v, [x], tf.int64))
    problem = save_problem(iter(python))
    assert problem is not None and "PyFunc is stateful" in problem


def test_first_of_pulls_the_first_element_once():
    import tensorflow as tf

    pulled = []

    def count(x):
        pulled.append(int(x))
        return x

    ds = tf.data.Dataset.range(3, 6).map(lambda x: tf.py_function(count, [x], tf.int64))
    sample = first_of(ds)
    assert int(sample()) == 3 and int(sample()) == 3
    assert pulled == [3]  # the pipeline ran for one element, once
    assert first_of(tf.data.Dataset.range(0))() is None  # an empty dataset


@pytest.fixture
def cfg(tmp_path):
    """tinydata's run file: pipeline.seed 1, 64 records in 2 shards."""
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    return load_config(str(trainkit.write_runfile(tmp_path, data)), [])


def test_a_resume_without_the_input_reseeds_it_by_the_step(cfg, capsys):
    assert input_seeded_by_step(cfg, 0) is cfg  # a fresh run keeps its seed
    resumed = input_seeded_by_step(cfg, 40)
    assert (resumed.pipeline.seed, cfg.pipeline.seed) == (41, 1)
    assert resumed.pipeline.batch_size == cfg.pipeline.batch_size  # nothing else changes
    assert "seeded with pipeline.seed + step = 1 + 40 = 41" in capsys.readouterr().err
    unseeded = cfg.model_copy(update={"pipeline": cfg.pipeline.model_copy(update={"seed": None})})
    assert input_seeded_by_step(unseeded, 40) is unseeded


def test_mean_record_bytes_from_the_manifest(cfg, tmp_path):
    shards = sorted((tmp_path / "data").glob("train.tfrecord-*"))
    assert mean_record_bytes(cfg) == sum(p.stat().st_size for p in shards) // 64
    piped = load_config(str(tmp_path / "run.yaml"), ["data.pipeline=somewhere:pipeline"])
    assert mean_record_bytes(piped) == 0  # a user's pipeline: unknown


def test_service_epochs_are_counted_for_one_trainer_of_tfperfs_pipeline(tmp_path, cfg):
    import tensorflow as tf

    one = StrategyInfo(tf.distribute.get_strategy(), "one_device", 1)
    several = StrategyInfo(tf.distribute.get_strategy(), "multi_worker", 1)
    service = ["pipeline.service.address=grpc://127.0.0.1:5000"]
    rf = str(tmp_path / "run.yaml")
    epochs = load_config(rf, [*service, "pipeline.service.mode=distributed_epoch"])
    assert epoch_counter(epochs, one) is not None
    assert epoch_counter(epochs, several) is None  # each trainer sees only its part
    parallel = load_config(rf, [*service, "pipeline.service.mode=parallel_epochs"])
    assert epoch_counter(parallel, one) is None
    assert epoch_counter(cfg, one) is None  # no service


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


CALLS = []


def counted(training, batch_size):
    CALLS.append(batch_size)
    return _pairs().repeat().batch(batch_size)


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


def test_one_device_training_builds_the_users_pipeline_once(tmp_path):
    import sys

    rf = _runfile(tmp_path, "counted")
    result = train(load_config(rf), max_steps=2, progress=False)
    assert result.steps == 2
    # Its spec, the model's check and the training input: one pipeline (it was two).
    assert sys.modules[load_config(rf).data.pipeline.split(":")[0]].CALLS == [8]


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
