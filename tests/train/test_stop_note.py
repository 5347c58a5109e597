"""The line a signal prints before the last save: with the input iterator in the
checkpoint, its size (the last checkpoint's on disk, which the next one matches); without
it, no word of an iterator. Real checkpoints of a real iterator."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tfperf.config import load_config
from tfperf.hooks import RunState
from tfperf.train.checkpoints.disk_full import newest_checkpoint_bytes
from tfperf.train.checkpoints.save import CheckpointHook, make_checkpoint, make_manager
from tfperf.train.stop_note import stop_note
from tfperf.util.disk import size_text

from helpers import trainkit


def hook_for(folder: Path, iterator=None) -> CheckpointHook:
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = make_checkpoint(tf.Module(), tf.Module(), step, iterator)
    return CheckpointHook(make_manager(ckpt, folder, keep=2), every_steps=None, every_seconds=None)


def test_the_note_gives_the_last_checkpoints_size(tmp_path):
    cfg = load_config(str(trainkit.write_runfile(tmp_path, tmp_path / "data")), [])
    it = iter(tf.data.Dataset.range(10_000).shuffle(5_000, seed=1))
    next(it)  # the shuffle buffer fills: it is what makes an iterator checkpoint large
    hook = hook_for(tmp_path / "ckpt", it)
    run = RunState(
        cfg=cfg,
        model=None,
        optimizer=None,
        strategy=None,
        step=3,
        out_dir=tmp_path,
        train_writer=None,
        examples_per_step=8,
    )
    hook.save(run)
    size = newest_checkpoint_bytes(tmp_path / "ckpt")
    assert size > 5_000 * 8  # the buffered int64s are in it
    note = stop_note(cfg, "SIGINT", 7, hook)
    assert note == (
        f"SIGINT: saving a checkpoint at step 7 with the input iterator (~{size_text(size)}, "
        "as large as the last checkpoint) and stopping; run the same command to resume"
    )


def test_without_the_iterator_the_note_names_none(tmp_path):
    cfg = load_config(str(trainkit.write_runfile(tmp_path, tmp_path / "data")), [])
    note = stop_note(cfg, "SIGTERM", 5, hook_for(tmp_path / "ckpt"))
    assert (
        note
        == "SIGTERM: saving a checkpoint at step 5 and stopping; run the same command to resume"
    )
