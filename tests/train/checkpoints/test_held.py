"""best/ always holds one whole checkpoint: the evaluator holds (hard-links) a checkpoint's
files before evaluating it, so that the trainer's checkpoint.keep deleting the original
meanwhile cannot leave best/ with best.json alone. The evaluated model deletes the original
checkpoint's files while it runs (as the trainer's keep does); `tfperf` runs through its
command line in this process."""

from __future__ import annotations

import json

import pytest

from helpers import trainkit

pytestmark = pytest.mark.slow  # real training and evaluating

DELETING = """
import glob
import os

import keras
import tensorflow as tf

from tinymodels import tiny


def _delete(x):
    # What the trainer's checkpoint.keep does to an old checkpoint, mid-evaluation (real
    # eval batches only: the fit check before any checkpoint runs a batch of one).
    for path in glob.glob(os.environ["DELETE_GLOB"]) if x.shape[0] > 1 else []:
        os.remove(path)
    return x


class DeleteCheckpoint(keras.layers.Layer):
    def call(self, x):
        out = tf.py_function(_delete, [x], x.dtype)
        out.set_shape(x.shape)
        return out

    def compute_output_shape(self, shape):
        return shape


def deleting():
    model = tiny()
    out = DeleteCheckpoint(name="deleter")(model.output)
    return keras.Model(model.input, out)
"""


def test_best_is_whole_when_the_checkpoint_is_deleted_during_its_evaluation(tmp_path, monkeypatch):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=2, steps_per_loop=1)
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    (tmp_path / "deleting.py").write_text(DELETING)
    ckpts = tmp_path / "run" / "checkpoints"
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--timeout", "60", "--json")
    sets = ("--set", "data.eval_split=train", "--set", "model.name=deleting:deleting")
    monkeypatch.setenv("DELETE_GLOB", str(ckpts / "ckpt-2.*"))
    proc = trainkit.tfperf_here(*args, *sets)
    assert [r["step"] for r in json.loads(proc.stdout)] == [2]
    assert not list(ckpts.glob("ckpt-2.*"))  # the original is gone
    best = tmp_path / "run" / "best"
    assert json.loads((best / "best.json").read_text())["step"] == 2
    names = sorted(p.name for p in best.iterdir())
    assert names == ["best.json", "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert not list((tmp_path / "run").glob(".eval.tmp-*"))  # the held copy is removed
    # The copy in best/ reads: it evaluates as the original did.
    again = trainkit.tfperf_here(
        "evaluate",
        str(rf),
        "--checkpoint",
        str(best / "ckpt-2"),
        "--json",
        "--set",
        "data.eval_split=train",
    )
    assert json.loads(again.stdout)["step"] == 2
