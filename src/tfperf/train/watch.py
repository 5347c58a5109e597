"""The watching evaluator's loop: evaluates each new finished checkpoint of a training run
once, catching up by jumping to the newest (or, with all_checkpoints, taking every one),
retrying checkpoints that fail to read, and stopping after the checkpoint the FINAL marker
names, at a timeout, or when the trainer process is gone.

Reading checkpoints is train/evaluator.py, writing results train/eval_outputs.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import ExitStack

from rich.markup import escape

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.train.checkpoints.damaged import DamagedCheckpointError
from tfperf.train.checkpoints.folder import (
    CheckpointInfo,
    is_complete,
    read_final,
    ready_checkpoints,
)
from tfperf.train.checkpoints.held import held_checkpoint
from tfperf.train.checkpoints.stale import remove_stale
from tfperf.train.eval_outputs import EvalOutputs, EvalRecord, check_eval_metric
from tfperf.train.evaluator import Evaluator, console, run_paths

# A checkpoint that fails to read this many polls in a row is given up (it was likely
# deleted by the manager's max_to_keep, or is corrupt).
MAX_READ_FAILURES = 3


def plan_catch_up(
    ready: list[CheckpointInfo], last_step: int, all_checkpoints: bool
) -> tuple[list[CheckpointInfo], int]:
    """(checkpoints to evaluate now, how many newer ones are skipped): every unseen one
    with all_checkpoints, else only the newest."""
    new = [c for c in ready if c.step > last_step]
    if all_checkpoints or not new:
        return new, 0
    return new[-1:], len(new) - 1


def _read_error_types() -> tuple[type[BaseException], ...]:
    # TensorFlow is imported on first use so that `tfperf --help` stays fast.
    import tensorflow as tf

    # A checkpoint deleted by max_to_keep or caught mid-write fails like this: retry later.
    return (tf.errors.OpError, OSError, ValueError)


def _parent_alive(pid: int | None, was_parent: bool) -> bool:
    if pid is None:
        return True
    import psutil

    if was_parent and os.getppid() != pid:
        return False  # we were re-parented: the trainer is gone
    return psutil.pid_exists(pid)


class _Watcher:
    """The state of one watch: what was evaluated, what failed, what was given up."""

    def __init__(self, cfg: RunConfig, max_batches: int | None, progress: bool):
        out_dir, self.ckpt_dir, log_dir = run_paths(cfg)
        self.evaluator = Evaluator(cfg, max_batches=max_batches, progress=progress)
        check_eval_metric(cfg, ["loss", *self.evaluator.metric_names])  # before any checkpoint
        # Made once the evaluator is built: a watch that cannot start leaves no folder.
        out_dir.mkdir(parents=True, exist_ok=True)
        for p in remove_stale(out_dir, self.ckpt_dir, holding=False):
            console.print(f"evaluator: removed {p}, left by a process killed while writing it")
        self.outputs = EvalOutputs(cfg, out_dir, log_dir)
        self.read_errors = _read_error_types()
        done = self.outputs.evaluated_steps()
        self.last_step = max(done) if done else -1
        self.failures: dict[str, int] = {}
        self.given_up: dict[str, str] = {}  # checkpoint -> why it was given up
        self.final_misses = 0  # polls on which FINAL named a checkpoint that is not on disk

    def ready(self, final: CheckpointInfo | None) -> list[CheckpointInfo]:
        """Finished checkpoints not given up, plus the FINAL one once it is on disk."""
        ready = [c for c in ready_checkpoints(self.ckpt_dir) if c.path not in self.given_up]
        if final and final.path not in self.given_up and is_complete(final.path):
            if all(c.step != final.step for c in ready):
                ready = sorted([*ready, final], key=lambda c: c.step)
        elif final and final.path not in self.given_up and final.step > self.last_step:
            self.final_misses += 1
            if self.final_misses > MAX_READ_FAILURES:  # moved or deleted: waiting cannot help
                console.print(
                    f"[yellow]evaluator: FINAL names {final.path}, which is not on disk; "
                    "stopping[/]"
                )
                self.given_up[final.path] = "FINAL names it, but it is not on disk"
        return ready

    def evaluate(self, ckpt: CheckpointInfo, skipped: int) -> EvalRecord | None:
        """The record of one checkpoint, or None when it could not be read (yet)."""
        t0 = time.monotonic()
        with ExitStack() as stack:  # the held copy lives until best/ is copied from it
            try:
                held = stack.enter_context(held_checkpoint(ckpt.path, self.outputs.out_dir))
                step, metrics, examples = self.evaluator.evaluate(held)
            except UserError:
                raise  # a wrong run file or metric: retrying cannot help
            except self.read_errors as exc:
                self._failed(ckpt, exc)
                return None
            rec = EvalRecord(
                step=ckpt.step,
                checkpoint=ckpt.path,
                metrics=metrics,
                skipped=skipped,
                seconds=time.monotonic() - t0,
                examples=examples,
            )
            if step != ckpt.step:
                console.print(f"[yellow]evaluator: {ckpt.path} holds step {step}[/]")
            self.outputs.write(rec, source=held)
        self.last_step = ckpt.step
        return rec

    def _failed(self, ckpt: CheckpointInfo, exc: BaseException) -> None:
        """Counts a failed read; the third one in a row gives the checkpoint up."""
        self.failures[ckpt.path] = self.failures.get(ckpt.path, 0) + 1
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if self.failures[ckpt.path] >= MAX_READ_FAILURES:
            self.given_up[ckpt.path] = msg
            console.print(
                f"[yellow]evaluator: giving up on {ckpt.path} after {MAX_READ_FAILURES} "
                f"tries (damaged or deleted): {escape(msg)}[/]"
            )
        else:
            console.print(f"evaluator: cannot read {ckpt.path} yet ({escape(msg)}); will retry")


def watch(
    cfg: RunConfig,
    *,
    all_checkpoints: bool = False,
    poll: float = 2.0,
    timeout: float | None = None,
    max_batches: int | None = None,
    parent_pid: int | None = None,
    progress: bool = False,
    on_record: Callable[[EvalRecord], None] | None = None,
    log: bool = False,
) -> list[EvalRecord]:
    """Evaluates each new finished checkpoint of the run once until the FINAL checkpoint
    is done (or `timeout` seconds pass, or process `parent_pid` exits); returns the
    records of this call. Checkpoints already in eval_results.jsonl are not redone.
    `log` also says on stderr which folder it watches and each checkpoint's results."""
    if log:
        console.print(f"evaluator: watching {run_paths(cfg)[1]} every {poll:g} s")
    w = _Watcher(cfg, max_batches, progress)
    records: list[EvalRecord] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    was_parent = parent_pid is not None and os.getppid() == parent_pid
    last_pass = False
    while True:
        final = read_final(w.ckpt_dir)
        todo, skipped = plan_catch_up(w.ready(final), w.last_step, all_checkpoints)
        if skipped:
            console.print(
                f"evaluator: behind by {skipped + 1} checkpoints; evaluating the newest "
                f"(step {todo[-1].step}), skipped {skipped}"
            )
        progressed = failed = False
        for ckpt in todo:
            rec = w.evaluate(ckpt, skipped)
            if rec is None:
                failed = True
                break  # the rest of the list is re-planned at the next poll
            records.append(rec)
            progressed = True
            if log:
                console.print(record_line(rec))
            if on_record is not None:
                on_record(rec)
        if final is not None and w.last_step >= final.step:
            break
        if final is not None and final.path in w.given_up:
            older = [c for c in w.ready(final) if c.step > w.last_step]
            if not older:
                break
            console.print(
                f"evaluator: falling back to the newest intact checkpoint, {older[-1].path}"
            )
            continue
        if last_pass:
            console.print("[yellow]evaluator: the trainer exited without FINAL; stopping[/]")
            break
        if progressed and not failed:
            continue  # more may have arrived while evaluating; a failure waits a poll
        if deadline is not None and time.monotonic() >= deadline:
            console.print(f"[yellow]evaluator: no FINAL after {timeout:g} s; stopping[/]")
            break
        if not _parent_alive(parent_pid, was_parent):
            last_pass = True  # one more look: the trainer may have saved as it stopped
            continue
        time.sleep(poll)
    if not records and w.given_up:  # nothing could be evaluated: the caller must not pass
        listed = "; ".join(f"{p}: {why}" for p, why in w.given_up.items())
        raise DamagedCheckpointError(
            f"evaluator: evaluated nothing; gave up on {listed}; evaluate an older checkpoint "
            "with `tfperf evaluate RUNFILE --checkpoint PREFIX`, or train again"
        )
    return records


def record_line(rec: EvalRecord) -> str:
    """'step N: loss=..., mae=... (best)' — the evaluator log's line for one checkpoint."""
    metrics = ", ".join(f"{k}={v:.5g}" for k, v in rec.metrics.items())
    mark = " [green](best)[/]" if rec.best else ""
    skipped = f" (skipped {rec.skipped})" if rec.skipped else ""
    return f"step {rec.step}: {metrics}{mark}{skipped}"
