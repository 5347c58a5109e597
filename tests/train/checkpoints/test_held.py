"""A checkpoint held while the evaluator uses it (checkpoints/held.py): its files
hard-linked into {out_dir}/.eval.tmp-PID, so the copy reads after the trainer's
checkpoint.keep deleted the original, and removed afterwards; one deleted before it could be
held is FileNotFoundError (real checkpoints of one variable). Then best/ always holds one
whole checkpoint: the evaluated model deletes the original checkpoint's files while it runs
(as the trainer's keep does); `tfperf` runs through its command line in this process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tfperf.train.checkpoints.held import held_checkpoint

from helpers import trainkit


def _checkpoint(folder: Path, value: float) -> str:
    import tensorflow as tf

    return tf.train.Checkpoint(v=tf.Variable(value)).write(str(folder / "ckpt-3"))


def test_the_held_copy_reads_after_the_original_is_deleted(tmp_path):
    import tensorflow as tf

    prefix = _checkpoint(tmp_path / "checkpoints", 3.0)
    out = tmp_path / "run"
    with held_checkpoint(prefix, out) as held:
        assert Path(held).parent == out / f".eval.tmp-{os.getpid()}"
        index = Path(f"{prefix}.index")
        assert Path(f"{held}.index").stat().st_ino == index.stat().st_ino  # linked, not copied
        for f in (tmp_path / "checkpoints").glob("ckpt-3.*"):
            f.unlink()  # what the trainer's checkpoint.keep does meanwhile
        v = tf.Variable(0.0)
        tf.train.Checkpoint(v=v).read(held).assert_consumed()
        assert float(v.numpy()) == 3.0
    assert list(out.iterdir()) == []  # the held copy goes afterwards


def test_a_checkpoint_deleted_before_it_is_held_is_not_found(tmp_path):
    prefix = _checkpoint(tmp_path / "checkpoints", 1.0)
    Path(f"{prefix}.data-00000-of-00001").unlink()  # deleted in part
    out = tmp_path / "run"
    with pytest.raises(FileNotFoundError, match="deleted before it could be held"):
        with held_checkpoint(prefix, out):
            pass
    assert list(out.iterdir()) == []


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


@pytest.mark.slow  # real training and evaluating
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
