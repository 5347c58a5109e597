"""Saving checkpoints: one tf.train.Checkpoint holding model, optimizer, step and
(optionally) the input iterator, saved by a hook every S steps or T seconds and on
SIGTERM/SIGINT, followed by the FINAL marker when training ends normally. The folder's
layout and reading it back live in checkpoints/folder.py.
"""

from __future__ import annotations

import shutil
import signal
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.hooks import Hook, RunState
from tfperf.train.checkpoints.disk_full import DiskFullError, disk_full_named
from tfperf.train.checkpoints.folder import write_final
from tfperf.train.checkpoints.stale import remove_checkpoint_temps

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

# Above this, saving the iterator (its shuffle buffer) makes every checkpoint slow and big.
ITERATOR_WARN_BYTES = 64 * 2**20
# Per buffered element bookkeeping in an iterator checkpoint (measured: ~200 B).
ITERATOR_OVERHEAD_BYTES = 200


def make_checkpoint(
    model: keras.Model, optimizer: keras.Optimizer, step: tf.Variable, iterator: Any = None
) -> tf.train.Checkpoint:
    """The one Checkpoint object; keys model, optimizer, step and iterator (when given)."""
    import tensorflow as tf

    items = {"model": model, "optimizer": optimizer, "step": step}
    if iterator is not None:
        items["iterator"] = iterator
    return tf.train.Checkpoint(**items)


def make_manager(checkpoint: Any, directory: Path, keep: int) -> Any:
    import tensorflow as tf

    return tf.train.CheckpointManager(
        checkpoint, str(directory), max_to_keep=keep, checkpoint_name="ckpt"
    )


def iterator_checkpoint_bytes(shuffle_buffer: int, record_bytes: int) -> int:
    """What the shuffle buffer adds to each checkpoint when the iterator is saved."""
    return shuffle_buffer * (record_bytes + ITERATOR_OVERHEAD_BYTES)


def warn_if_iterator_large(shuffle_buffer: int, record_bytes: int) -> int:
    size = iterator_checkpoint_bytes(shuffle_buffer, record_bytes)
    if size > ITERATOR_WARN_BYTES:
        warnings.warn(
            f"train.checkpoint_input: each checkpoint will hold the shuffle buffer, "
            f"~{size / 2**20:.0f} MiB ({shuffle_buffer} records x ~{record_bytes} B); lower "
            "pipeline.shuffle_buffer or set train.checkpoint_input=false (resume then "
            "restarts the epoch's input instead of continuing it exactly)",
            stacklevel=2,
        )
    return size


class CheckpointHook(Hook):
    """Saves every `every_steps` steps or `every_seconds` seconds, at the end, and writes
    FINAL after the last save when training ended normally.

    On non-chief multi-worker tasks it saves into a scratch folder and deletes it (the
    variables' save is collective, so every worker must take part).
    """

    NORMAL_ENDS = ("max_steps", "epochs", "max_time")

    def __init__(
        self,
        manager: Any,
        every_steps: int | None,
        every_seconds: float | None,
        *,
        scratch_dir: Path | None = None,
    ):
        self.manager = manager
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.scratch_dir = scratch_dir
        self.last_saved_step = -1
        self.last_time = time.monotonic()
        self.saved: list[str] = []
        self.disk_full = False  # a save failed for space: the end does not try again

    @property
    def saves_input(self) -> bool:
        """Whether each checkpoint holds the input iterator (train.checkpoint_input)."""
        return getattr(self.manager.checkpoint, "iterator", None) is not None

    def save(self, run: RunState) -> str | None:
        if run.step == self.last_saved_step:
            return self.manager.latest_checkpoint
        directory = Path(self.manager.directory)
        fix = "set train.out_dir to a folder on another disk (or lower checkpoint.keep)"
        try:
            with disk_full_named("saving a checkpoint", directory, fix):
                path = self.manager.save(checkpoint_number=run.step)
        except DiskFullError:
            self.disk_full = True
            remove_checkpoint_temps(
                directory
            )  # its partial ckpt-N_temp (this process writes there)
            raise
        self.last_saved_step = run.step
        self.last_time = time.monotonic()
        self.saved.append(path)
        return path

    def on_train_begin(self, run: RunState) -> None:
        # Nothing new to save until a step is taken (a failed start leaves no ckpt-0).
        self.last_saved_step = run.step
        self.last_time = time.monotonic()

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        if run.stop_reason == "nan":
            return
        due_steps = self.every_steps and step % self.every_steps == 0
        due_time = self.every_seconds and time.monotonic() - self.last_time >= self.every_seconds
        if due_steps or due_time:
            self.save(run)

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        if run.stop_reason == "nan" or self.disk_full:
            return  # keep the last good checkpoint; never save a diverged state
        path = self.save(run)
        run.last_checkpoint = path
        if self.scratch_dir is not None:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
            try:
                self.scratch_dir.parent.rmdir()  # the last worker out removes the folder
            except OSError:
                pass
            return
        if run.stop_reason in self.NORMAL_ENDS:
            write_final(Path(self.manager.directory), run.step, path)


class StopOnSignal:
    """Turns SIGTERM/SIGINT into a stop request: the loop finishes its call, the checkpoint
    hook saves, then training returns. A second signal raises KeyboardInterrupt."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, run: RunState):
        self.run = run
        self.previous: dict[int, Any] = {}
        self.received: str | None = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        self.run.stop_reason = "signal"
        self.run.signal = self.received

    def __enter__(self) -> StopOnSignal:
        try:
            for s in self.SIGNALS:
                self.previous[s] = signal.signal(s, self._handler)
        except ValueError:  # not the main thread: leave signals to the caller
            self.previous.clear()
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)
