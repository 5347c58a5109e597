"""The training loop's lifecycle hooks and the state they see.

The loop calls every hook through one list (`HookList`), never through branches: checkpoints,
TensorBoard summaries, the NaN check, progress and system sampling are all hooks. A hook may
ask the loop to stop by setting `run.stop_reason`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError

if TYPE_CHECKING:  # Keras and TensorFlow load with the model; a hook module stays light
    import keras
    import tensorflow as tf

    from tfperf.config import RunConfig


@dataclass
class RunState:
    """What the loop shares with its hooks; `step` is the global step after the last call."""

    cfg: RunConfig
    model: keras.Model
    optimizer: keras.Optimizer
    strategy: tf.distribute.Strategy
    step: int
    out_dir: Path
    train_writer: Any  # tf.summary writer for logs/train (a no-op writer on non-chief workers)
    examples_per_step: int  # the global batch
    checkpoint_dir: Path | None = None
    log_dir: Path | None = None
    is_chief: bool = True
    precision: str = "float32"
    iterator: Any = None
    train_step: Any = None  # tfperf.train.step.TrainStep
    stop_reason: str | None = None  # set by a hook (or a signal) to end training after this call
    # What the loop and its hooks report to each other (read at the run's end):
    strategy_info: Any = None  # tfperf.train.strategy.StrategyInfo of this run
    signal: str | None = None  # the signal's name (SIGTERM, SIGINT) when one stopped the run
    nan_message: str | None = None  # why the loss check stopped the run (stop_reason "nan")
    last_checkpoint: str | None = None  # the checkpoint saved as training ended
    # The run's examples/s so far over its timed calls: what the end-of-run summary says.
    examples_per_sec: float | None = None
    corrupt_skipped_per_epoch: int | None = None  # records pipeline.on_corrupt=skip drops


class Hook:
    """Base class: every method is a no-op; override the ones you need."""

    def on_train_begin(self, run: RunState) -> None:
        pass

    def on_loop_begin(self, run: RunState, step: int) -> None:
        pass

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        pass

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        pass


class HookList(Hook):
    """Calls each hook in order; the loop talks to this one object only."""

    def __init__(self, hooks: Sequence[Hook] = ()):
        self.hooks = list(hooks)

    def on_train_begin(self, run: RunState) -> None:
        for h in self.hooks:
            h.on_train_begin(run)

    def on_loop_begin(self, run: RunState, step: int) -> None:
        for h in self.hooks:
            h.on_loop_begin(run, step)

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        for h in self.hooks:
            h.on_loop_end(run, step, logs)

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        # Every hook gets to clean up even when an earlier one fails.
        errors: list[BaseException] = []
        for h in self.hooks:
            try:
                h.on_train_end(run, logs)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
        if errors:
            raise errors[0]


class NonFiniteLossError(UserError):
    """The loss became NaN or Inf; training stopped, keeping the last good checkpoint."""
