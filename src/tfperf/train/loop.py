"""tfperf's training loop: calls of the compiled multi-step train function until the target
step (max_steps or epochs), max_time, a signal or a non-finite loss. Everything around the
calls (checkpoints, TensorBoard, NaN check, progress, system sampling) is a hook, called
through one list; building the run is train/setup.py.

Why not `model.fit`: fit cannot resume mid-epoch with the input iterator's state, cannot run
under MultiWorkerMirrored or ParameterServer strategies in Keras 3, and cannot say how long
each step waited for input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.hooks import Hook, NonFiniteLossError
from tfperf.observe.feed import (
    WINDOWS_NOTE,
    FeedMeter,
    PipelineSnapshot,
    merge_snapshots,
    pipeline_snapshot,
)
from tfperf.runreport.run_dir import save_summary
from tfperf.train.checkpoints.save import CheckpointHook, StopOnSignal
from tfperf.train.corrupt import corrupt_shards_named
from tfperf.train.evaluator import check_eval_settings
from tfperf.train.evaluator_process import EvaluatorChild
from tfperf.train.fit_check import class_labels_named
from tfperf.train.parts import run_call
from tfperf.train.service_watch import ServiceWatch
from tfperf.train.setup import TrainSession, prepare, say
from tfperf.train.stop_note import stop_note
from tfperf.util.format import percent_figure, rate_figure

__all__ = [
    "TrainResult",
    "auto_steps_per_loop",
    "plan_call_steps",
    "run_session",
    "train",
]

# `steps_per_loop: auto` aims for calls of this length: long enough that the per-call
# Python round trip is amortised, short enough for timely logs, checkpoints and signals.
TARGET_CALL_SECONDS = 0.3
MAX_STEPS_PER_LOOP = 1000
PROBE_STEPS = 4  # steps of the call that measures the step time (after the compiling call)


@dataclass
class TrainResult:
    steps: int
    examples_per_sec: float
    input_bound_fraction: float
    wait_ms_mean: float
    final_loss: float
    out_dir: Path
    checkpoint_dir: Path
    log_dir: Path
    precision: str
    strategy: str
    stopped_because: str
    start_step: int = 0
    signal: str | None = None  # SIGTERM or SIGINT when stopped_because is "signal"
    restored_from: str | None = None
    steps_per_loop: int = 1
    global_batch: int = 0
    precision_detail: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    buffered_mean: float | None = None
    pipeline: PipelineSnapshot | None = None
    checkpoint: str | None = None
    evaluator: dict[str, Any] | None = None  # EvaluatorOutcome.to_dict() with --evaluator
    service: dict[str, Any] | None = None  # ServiceWatch.report() with pipeline.service on
    service_summary: str | None = None
    jit_compile: bool = False  # the train step compiled with XLA (train.jit_compile)
    jit_compile_reason: str = ""
    # examples_per_sec's and input_bound_fraction's slowest and fastest window of timed
    # calls (FeedMeter; None below two windows): their spread.
    examples_per_sec_range: tuple[float, float] | None = None
    input_bound_fraction_range: tuple[float, float] | None = None

    @property
    def examples_per_sec_text(self) -> str:
        """'37,891 (30,112-41,230)': the rate with its slowest and fastest window."""
        return rate_figure(self.examples_per_sec, self.examples_per_sec_range)

    @property
    def input_bound_fraction_text(self) -> str:
        """'8.3% (5.1-10.2%)': the input-bound fraction with its least and most window."""
        return percent_figure(self.input_bound_fraction, self.input_bound_fraction_range)

    @property
    def spread_note(self) -> str | None:
        """What the brackets of the two texts say (None: no brackets)."""
        spans = (self.examples_per_sec_range, self.input_bound_fraction_range)
        return WINDOWS_NOTE if any(s is not None for s in spans) else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("out_dir", "checkpoint_dir", "log_dir"):
            d[k] = str(d[k])
        # The texts the CLI prints, for the report to show the same figures.
        d["examples_per_sec_text"] = self.examples_per_sec_text
        d["input_bound_fraction_text"] = self.input_bound_fraction_text
        d["spread_note"] = self.spread_note
        return d


# ---- planning (pure) -----------------------------------------------------------------------
def plan_call_steps(
    step: int,
    steps_per_loop: int,
    target: int | None,
    checkpoint_every: int | None,
    log_every: int | None = None,
) -> int:
    """Steps in the next call: steps_per_loop, cut at the target and at the next checkpoint
    boundary (so that checkpoints land on exact multiples of checkpoint.every_steps), and
    at the next logging boundary when `log_every` is given (`steps_per_loop: auto`)."""
    n = steps_per_loop
    if target is not None:
        n = min(n, target - step)
    for every in (checkpoint_every, log_every):
        if every:
            n = min(n, every - step % every)
    return max(1, n)


def auto_steps_per_loop(step_seconds: float) -> int:
    if step_seconds <= 0 or not math.isfinite(step_seconds):
        return MAX_STEPS_PER_LOOP
    return max(1, min(MAX_STEPS_PER_LOOP, round(TARGET_CALL_SECONDS / step_seconds)))


class StepsPerLoop:
    """train.steps_per_loop, or for `auto`: one step (the call that compiles), then a
    PROBE_STEPS call, then sized from the fastest step seen so far."""

    def __init__(self, setting: int | str):
        self.fixed = setting if isinstance(setting, int) else None  # else "auto"
        self.steps = self.fixed or 1
        self.calls = 0
        self.best_step = math.inf

    def after_call(self, wall: float, n: int) -> None:
        self.calls += 1
        if self.fixed is not None:
            return
        if self.calls == 1:
            self.steps = PROBE_STEPS
            return
        # The fastest step: one slow call (another process on the machine) must not pin a
        # short loop for the whole run.
        self.best_step = min(self.best_step, wall / n)
        self.steps = auto_steps_per_loop(self.best_step)


def call_logs(
    out: dict[str, float], first: int, n: int, wall: float, optimizer: Any
) -> dict[str, float]:
    """The logs hooks see after a call: loss, metrics, learning rate, step/* and input/*."""
    logs = {"loss": out["loss"], "first_step": float(first), "steps": float(n)}
    logs.update({k: v for k, v in out.items() if k.startswith("metrics/")})
    try:
        logs["learning_rate"] = float(optimizer.learning_rate)
    except (TypeError, ValueError):
        pass
    logs["step/time_ms"] = 1e3 * wall / n
    # The rows the call's batches held (a partial last batch is not a full one).
    logs["step/examples_per_sec"] = out["examples"] / wall if wall > 0 else 0.0
    logs["input/wait_ms"] = 1e3 * out["wait_s"] / n
    logs["input/wait_fraction"] = min(1.0, out["wait_s"] / wall) if wall > 0 else 0.0
    return logs


# ---- the loop ------------------------------------------------------------------------------
def train(
    cfg: RunConfig,
    *,
    hooks: Sequence[Hook] = (),
    max_steps: int | None = None,
    evaluator: bool = False,
    progress: bool = True,
    overrides: Sequence[str] = (),
) -> TrainResult:
    """Trains the run file's model; resumes from the latest checkpoint in
    {train.out_dir}/checkpoints. `max_steps` (a global step) overrides train.max_steps;
    `evaluator` also runs the watching evaluator in a child process, with `overrides` (the
    --set values) on top of the same run file."""
    # Keras (hence TensorFlow) is imported on first use so that `tfperf --help` stays fast.
    import keras

    # The dtype policy is global in Keras: restore it so later models in this process
    # (an evaluator, a test) are not silently built in mixed precision.
    previous = keras.config.dtype_policy()
    try:
        # The lock on train.out_dir is held for the whole run (another `tfperf train` there
        # is refused); the evaluator beside it only reads checkpoints and takes none.
        with corrupt_shards_named(cfg), class_labels_named(cfg), ExitStack() as held:
            session = prepare(cfg, hooks=hooks, max_steps=max_steps, progress=progress, held=held)
            child = None
            if evaluator and session.info.is_chief:
                child = _start_evaluator(session, overrides)
            result = run_session(session, evaluator=child)
            if session.info.is_chief:  # {out_dir}/summary.json, for `tfperf report`
                save_summary(session.dirs.out_dir, cfg.source, result.to_dict())
            return result
    finally:
        keras.config.set_dtype_policy(previous)


def _start_evaluator(session: TrainSession, overrides: Sequence[str]) -> EvaluatorChild:
    """Checks what the evaluator would stop at before training starts, then starts it."""
    cfg = session.cfg
    if cfg.source is None:
        raise UserError("--evaluator: needs a run file (the evaluator reads the same one)")
    check_eval_settings(cfg, session.parts.train_step.metric_names)
    child = EvaluatorChild(cfg.source, list(overrides), session.dirs.out_dir, session.dirs.log_dir)
    session.hooks.hooks.append(child)  # last: its end waits for the checkpoint hook's FINAL
    return child


def _stop_reason(step: int, target: int | None, reason: str, deadline: float | None) -> str | None:
    if target is not None and step >= target:
        return reason
    if deadline is not None and time.monotonic() >= deadline:
        return "max_time"
    return None


def run_session(session: TrainSession, *, evaluator: EvaluatorChild | None = None) -> TrainResult:
    """Calls the train function until a stop reason; `evaluator` (a child process, one of
    the session's hooks) is awaited after a normal end and stopped otherwise."""
    s, run_state, hooks = session, session.run, session.hooks
    cfg, info = s.cfg, s.info
    meter = FeedMeter()
    start_step = step = run_state.step
    spl = StepsPerLoop(cfg.train.steps_per_loop)
    ckpt_every = cfg.train.checkpoint.every_steps
    # auto sizes calls for speed alone: cut them where TensorBoard expects a point too; a
    # fixed steps_per_loop is the user's choice (scalars then come once per call).
    log_every = cfg.train.log_every if spl.fixed is None else None
    if spl.fixed is not None and spl.fixed > cfg.train.log_every:
        say(
            s.progress,
            f"note: train.steps_per_loop={spl.fixed} > train.log_every={cfg.train.log_every}: "
            f"scalars are written once per call (every {spl.fixed} steps)",
        )
    deadline = time.monotonic() + cfg.train.max_time if cfg.train.max_time else None
    logs: dict[str, float] = {}
    last_snapshot: PipelineSnapshot | None = None
    if s.target is not None and step >= s.target:
        done = f"already at step {step} (target {s.target}, {s.target_reason})"
        say(True, f"{done}: nothing to train")
    try:
        with StopOnSignal(run_state):
            hooks.on_train_begin(run_state)
            while run_state.stop_reason is None:
                run_state.stop_reason = _stop_reason(step, s.target, s.target_reason, deadline)
                if run_state.stop_reason is not None:
                    break
                n = plan_call_steps(step, spl.steps, s.target, ckpt_every, log_every)
                hooks.on_loop_begin(run_state, step)
                t0 = time.perf_counter()
                out = run_call(info, s.parts.train_step, s.iterator, n)
                wall = time.perf_counter() - t0
                first, step = step + 1, step + n
                run_state.step = step
                if spl.calls > 0 or s.target == step:  # the first call compiles: not timed
                    meter.add(out["wait_s"], wall, n, int(out["examples"]))
                    run_state.examples_per_sec = meter.examples_per_s
                spl.after_call(wall, n)
                logs = call_logs(out, first, n, wall, s.parts.optimizer)
                snap = pipeline_snapshot(s.iterator) if info.coordinator is None else None
                if snap is not None:
                    last_snapshot = merge_snapshots(last_snapshot, snap)
                    _log_snapshot(logs, last_snapshot, meter)
                hooks.on_loop_end(run_state, step, logs)
            if run_state.stop_reason == "signal":
                saver = next((h for h in hooks.hooks if isinstance(h, CheckpointHook)), None)
                say(True, stop_note(cfg, run_state.signal or "signal", step, saver))
    finally:
        hooks.on_train_end(run_state, logs)
    watch = next((h for h in hooks.hooks if isinstance(h, ServiceWatch)), None)
    if run_state.stop_reason == "nan":
        raise NonFiniteLossError(run_state.nan_message or "the loss is not finite")
    return TrainResult(
        steps=step,
        examples_per_sec=meter.examples_per_s,
        input_bound_fraction=meter.wait_fraction,
        examples_per_sec_range=meter.examples_per_s_range,
        input_bound_fraction_range=meter.wait_fraction_range,
        wait_ms_mean=meter.wait_ms_mean,
        final_loss=logs.get("loss", math.nan),
        out_dir=s.dirs.out_dir,
        checkpoint_dir=s.dirs.checkpoint_dir,
        log_dir=s.dirs.log_dir,
        precision=s.choice.policy,
        strategy=info.kind,
        stopped_because=run_state.stop_reason or "unknown",
        signal=run_state.signal,
        start_step=start_step,
        restored_from=s.restore_path,
        steps_per_loop=min(spl.steps, log_every) if log_every else spl.steps,
        global_batch=s.global_batch,
        precision_detail=s.choice.describe(),
        metrics={k: v for k, v in logs.items() if k.startswith("metrics/")},
        buffered_mean=meter.buffered_mean,
        pipeline=last_snapshot,
        checkpoint=run_state.last_checkpoint,
        evaluator=evaluator.outcome.to_dict() if evaluator and evaluator.outcome else None,
        service=watch.report() if watch else None,
        service_summary=watch.summary() if watch else None,
        jit_compile=s.parts.train_step.jit.enabled,
        jit_compile_reason=s.parts.train_step.jit.reason,
    )


def _log_snapshot(logs: dict[str, float], snap: PipelineSnapshot, meter: FeedMeter) -> None:
    """tf.data's own view of the input after a call: the prefetch buffer and each stage."""
    logs["input/buffered"] = float(snap.buffered)
    meter.add_buffered(snap.buffered)
    for i, stage in enumerate(snap.stages):
        if stage.elements:  # a stage that produced nothing yet has no time to show
            logs[f"input/stage_us/{i:02d}_{stage.name}"] = stage.us_per_element
