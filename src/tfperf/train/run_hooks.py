"""The training loop's own hooks besides checkpoints and summaries: the NaN check that
stops a diverged run, and the progress bar over steps (loss and examples/s beside it)."""

from __future__ import annotations

import math
from contextlib import ExitStack

from tfperf.hooks import Hook, RunState
from tfperf.util.format import number
from tfperf.util.progress import ProgressBar, progress_bar


class NanCheck(Hook):
    """Marks the run as diverged at the first non-finite loss; the checkpoint hook then keeps
    the last good checkpoint and the loop raises NonFiniteLossError naming the steps."""

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(loss) and run.stop_reason != "nan":
            first = int(logs.get("first_step", step))
            run.stop_reason = "nan"
            run.nan_message = (
                f"loss is {loss} in the loop call covering steps {first}-{step}; the last "
                "good checkpoint was kept. Lower model.learning_rate, check the data for "
                "NaN/Inf, or use train.precision=float32"
            )


class ProgressHook(Hook):
    """The progress bar over global steps (to stderr), with loss and examples/s: N/M is the
    global step reached over the target global step, also after a resume. The rate is the
    run's mean so far (run.examples_per_sec), the one the end-of-run summary reports, not
    the last call's."""

    def __init__(self, total: int | None):
        self.total = total
        self._stack = ExitStack()
        self.bar: ProgressBar | None = None

    def on_train_begin(self, run: RunState) -> None:
        if self.total is not None and run.step >= self.total:
            return  # resumed at or past the target: no "16/10" bar for zero steps
        self.bar = self._stack.enter_context(
            progress_bar("train", total=self.total, completed=run.step)
        )

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        info = f"loss {logs.get('loss', float('nan')):.4g}"
        if run.examples_per_sec:  # none yet after the first call, which compiles
            info += f"  {number(run.examples_per_sec)} ex/s mean"
        if self.bar is not None:
            self.bar.update(completed=step, info=info)

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        self._stack.close()
        self.bar = None
