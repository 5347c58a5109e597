"""Saving checkpoints (checkpoints/save.py) with a real tf.train.CheckpointManager in
tmp_path: the hook saves every S steps or T seconds, never twice at one step, at the end
followed by FINAL only when training ended normally (a signal saves without FINAL, a NaN
loss saves nothing), a non-chief worker's scratch folder removed at the end; the size a
saved input iterator adds, announced when large; SIGTERM/SIGINT turned into a stop request
(a second one interrupts)."""

from __future__ import annotations

import signal
import time
import warnings
from pathlib import Path

import pytest
import tensorflow as tf

from tfperf.train.checkpoints.folder import read_final
from tfperf.train.checkpoints.save import (
    CheckpointHook,
    StopOnSignal,
    iterator_checkpoint_bytes,
    make_checkpoint,
    make_manager,
    warn_if_iterator_large,
)

from helpers import trainkit


def _hook(folder: Path, every_steps=None, every_seconds=None, iterator=None, **kw):
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = make_checkpoint(tf.Module(), tf.Module(), step, iterator)
    manager = make_manager(ckpt, folder, keep=5)
    return CheckpointHook(manager, every_steps, every_seconds, **kw)


def _saved(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ckpt-*.index"))


def test_saves_every_s_steps_and_never_twice_at_one_step(tmp_path):
    ckpts = tmp_path / "checkpoints"
    hook, run = _hook(ckpts, every_steps=4), trainkit.run_state(tmp_path)
    hook.on_train_begin(run)
    for step in (2, 4, 6, 8):
        run.step = step
        hook.on_loop_end(run, step, {"loss": 1.0})
    assert _saved(ckpts) == ["ckpt-4.index", "ckpt-8.index"]
    assert hook.save(run) == hook.saved[-1] == str(ckpts / "ckpt-8")  # step 8 again: no save
    assert len(hook.saved) == 2 and not hook.saves_input


def test_saves_every_t_seconds(tmp_path):
    ckpts = tmp_path / "checkpoints"
    hook, run = _hook(ckpts, every_seconds=60), trainkit.run_state(tmp_path)
    hook.on_train_begin(run)
    run.step = 3
    hook.on_loop_end(run, 3, {})
    assert _saved(ckpts) == []  # not 60 s yet
    hook.last_time = time.monotonic() - 61
    hook.on_loop_end(run, 3, {})
    assert _saved(ckpts) == ["ckpt-3.index"]


@pytest.mark.parametrize(
    ("reason", "saved", "final"),
    [
        ("max_steps", True, True),
        ("epochs", True, True),
        ("signal", True, False),
        ("nan", False, False),
    ],
)
def test_the_end_saves_and_writes_final_after_a_normal_end(tmp_path, reason, saved, final):
    ckpts = tmp_path / "checkpoints"
    hook, run = _hook(ckpts), trainkit.run_state(tmp_path)
    hook.on_train_begin(run)
    run.step, run.stop_reason = 5, reason
    hook.on_train_end(run, {})
    assert _saved(ckpts) == (["ckpt-5.index"] if saved else [])
    assert run.last_checkpoint == (str(ckpts / "ckpt-5") if saved else None)
    got = read_final(ckpts)
    assert (got.step, got.path) == (5, str(ckpts / "ckpt-5")) if final else got is None


def test_a_non_chief_workers_scratch_folder_goes_at_the_end(tmp_path):
    scratch = tmp_path / "worker_scratch" / "worker_1"
    hook, run = _hook(scratch, scratch_dir=scratch), trainkit.run_state(tmp_path)
    hook.on_train_begin(run)
    run.step, run.stop_reason = 2, "max_steps"
    hook.on_train_end(run, {})
    assert hook.saved == [str(scratch / "ckpt-2")]  # it took part in the save
    assert not (tmp_path / "worker_scratch").exists()  # the last worker out removes it all


def test_a_saved_iterator_is_part_of_the_checkpoint(tmp_path):
    it = iter(tf.data.Dataset.range(100))
    hook = _hook(tmp_path / "checkpoints", iterator=it)
    assert hook.saves_input
    run = trainkit.run_state(tmp_path, step=1)
    next(it), next(it)
    hook.save(run)
    again = iter(tf.data.Dataset.range(100))
    tf.train.Checkpoint(iterator=again).read(str(tmp_path / "checkpoints" / "ckpt-1"))
    assert int(next(again)) == 2  # restored where the saved one was


def test_large_iterator_checkpoint_is_announced_with_its_size():
    assert iterator_checkpoint_bytes(1000, 800) == 1000 * 1000
    with pytest.warns(UserWarning, match=r"~191 MiB \(200000 records x ~800 B\)"):
        warn_if_iterator_large(200_000, 800)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_iterator_large(10_000, 800)  # ~10 MiB: no warning


def test_a_signal_is_a_stop_request_and_a_second_one_interrupts(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    run = trainkit.run_state(tmp_path)
    with StopOnSignal(run) as stop:
        signal.raise_signal(signal.SIGTERM)
        assert (run.stop_reason, run.signal, stop.received) == ("signal", "SIGTERM", "SIGTERM")
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handler is back
