"""A data.pipeline function that returns one epoch (finite, as for model.fit): training
repeats it unless pipeline.repeat is false, evaluation reads it once, and a training input
that runs out is one error naming pipeline.repeat, with exit 2 and no traceback."""

from __future__ import annotations

import json
import textwrap

import yaml

from tfperf.config import load_config
from tfperf.inputs.datasets import make_input_dataset
from tfperf.train.run_input import dataset_fn

EPOCH = 5  # batches in the user's one epoch

PIPELINE = textwrap.dedent(
    f"""
    import keras
    import tensorflow as tf

    def make(batch_size=4, **_):
        ds = tf.data.Dataset.range({EPOCH} * batch_size)
        ds = ds.map(lambda i: (tf.fill([3], tf.cast(i, tf.float32)), tf.cast(i % 2, tf.float32)))
        return ds.batch(batch_size).prefetch(2)

    def model():
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    """
)


def _runfile(tmp_path, **pipeline):
    (tmp_path / "epochs_pipe.py").write_text(PIPELINE)
    doc = {
        "data": {"pipeline": "epochs_pipe:make"},
        "pipeline": {"batch_size": 4, **pipeline},
        "model": {"name": "epochs_pipe:model", "loss": "binary_crossentropy_from_logits"},
        "train": {"out_dir": str(tmp_path / "run"), "max_steps": 3 * EPOCH, "precision": "float32"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_training_repeats_a_finite_user_pipeline_and_evaluation_reads_it_once(tmp_path):
    import tensorflow as tf

    cfg = load_config(_runfile(tmp_path))
    train = dataset_fn(cfg)(tf.distribute.InputContext())
    assert train.cardinality() == tf.data.INFINITE_CARDINALITY
    assert len(list(train.take(2 * EPOCH + 1))) == 2 * EPOCH + 1  # past the end of an epoch
    assert len(list(make_input_dataset(cfg, training=False))) == EPOCH


def test_train_runs_past_the_users_epoch(tmp_path, cli):
    res = cli("train", _runfile(tmp_path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"] == 3 * EPOCH


def test_an_input_that_runs_out_names_pipeline_repeat(tmp_path, cli):
    res = cli("train", _runfile(tmp_path, repeat=False), "--no-progress")
    assert res.exit_code == 2, res.output
    said = " ".join(res.stderr.split())
    assert "the input ran out at step" in said and "pipeline.repeat is false" in said, said
    assert "Traceback" not in res.output
