"""Corrupt TFRecord data during training: with `pipeline.on_corrupt: error` the failure
names the damaged shard; with `skip` the records lost each epoch are counted and reported
at every epoch's end (stdout and input/corrupt_skipped in TensorBoard)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from tfperf.config import RunConfig
from tfperf.hooks import Hook, RunState


@contextlib.contextmanager
def corrupt_shards_named(cfg: RunConfig) -> Iterator[None]:
    """The run file's training shards under data/corrupt_shards.naming_corrupt_shards: TF's
    DataLossError (an offset, not a file) becomes a UserError naming the shard. A user's
    own data.pipeline has no known files and is left as it is."""
    from tfperf.data.corrupt_shards import naming_corrupt_shards
    from tfperf.inputs.datasets import split_shards

    shards = split_shards(cfg, training=True)
    guard = naming_corrupt_shards(shards.files, shards.compression) if shards else None
    with guard or contextlib.nullcontext():
        yield


class CorruptRecordsHook(Hook):
    """Reports, at each epoch's end, how many records on_corrupt=skip dropped.

    The count is the same every epoch (a bad record ends its shard's read), so one scan,
    run in a background thread from the start of training, gives it.
    """

    def __init__(self, cfg: RunConfig, steps_per_epoch: int):
        self.cfg = cfg
        self.steps_per_epoch = max(1, steps_per_epoch)
        self.skipped: int | None = None
        self._thread: threading.Thread | None = None
        self.reports: list[tuple[int, int]] = []  # (epoch, skipped records)

    def _scan(self) -> None:
        from tfperf.inputs.datasets import skipped_per_epoch

        self.skipped = skipped_per_epoch(self.cfg, training=True)

    def on_train_begin(self, run: RunState) -> None:
        self._epoch = run.step // self.steps_per_epoch
        self._thread = threading.Thread(target=self._scan, name="corrupt-scan", daemon=True)
        self._thread.start()

    def _report(self, run: RunState, epoch: int) -> None:
        import tensorflow as tf

        if self._thread is not None:
            self._thread.join()  # the scan reads each shard once; done long before an epoch
        skipped = self.skipped or 0
        self.reports.append((epoch, skipped))
        run.corrupt_skipped_per_epoch = skipped
        if skipped and run.is_chief:
            print(
                f"epoch {epoch}: skipped {skipped} corrupt record(s) (pipeline.on_corrupt: skip)",
                file=sys.stderr,
                flush=True,
            )
        with run.train_writer.as_default(step=run.step):
            tf.summary.scalar("input/corrupt_skipped", skipped)

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        epoch = step // self.steps_per_epoch
        while self._epoch < epoch:  # one report per finished epoch, even if a call spans two
            self._epoch += 1
            self._report(run, self._epoch)
