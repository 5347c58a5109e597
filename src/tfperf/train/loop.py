"""tfperf's training loop: strategy, precision, model, input, checkpoint restore, then calls
of the compiled multi-step train function until max_steps, epochs, max_time, a signal or a
non-finite loss. Everything around the calls (checkpoints, TensorBoard, NaN check, progress,
system sampling) is a hook, called through one list.

Why not `model.fit`: fit cannot resume mid-epoch with the input iterator's state, cannot run
under MultiWorkerMirrored or ParameterServer strategies in Keras 3, and cannot say how long
each step waited for input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.hooks import Hook, HookList, NonFiniteLossError, RunState
from tfperf.observe.feed import FeedMeter, PipelineSnapshot, pipeline_snapshot
from tfperf.observe.summaries import SummaryHook, make_writer
from tfperf.train.checkpoint import (
    CheckpointHook,
    StopOnSignal,
    clear_final,
    make_checkpoint,
    make_manager,
    run_dirs,
    warn_if_iterator_large,
)
from tfperf.train.corrupt import corrupt_shards_named
from tfperf.train.precision import (
    PrecisionChoice,
    Trial,
    choose_precision,
    set_policy,
    supported_policies,
    wrap_optimizer,
)
from tfperf.train.step import (
    TrainStep,
    build_model_and_loss,
    build_model_variables,
    make_optimizer,
)
from tfperf.train.strategy import (
    StrategyInfo,
    checkpointable_iterator,
    distribute_input,
    make_strategy,
)

__all__ = ["ComputeLimit", "TrainResult", "build_model_and_loss", "compute_limit", "train"]

# `steps_per_loop: auto` aims for calls of this length: long enough that the per-call
# Python round trip is amortised, short enough for timely logs, checkpoints and signals.
TARGET_CALL_SECONDS = 0.3
MAX_STEPS_PER_LOOP = 1000
PROBE_STEPS = 4  # steps of the call that measures the step time (after the compiling call)
TRIAL_STEPS = 8  # steps per timed call when `precision: auto` measures a policy
TRIAL_CALLS = 3  # timed calls per policy (the fastest counts)


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
    restored_from: str | None = None
    steps_per_loop: int = 1
    global_batch: int = 0
    precision_detail: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    buffered_mean: float | None = None
    pipeline: PipelineSnapshot | None = None
    checkpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("out_dir", "checkpoint_dir", "log_dir"):
            d[k] = str(d[k])
        return d


# ---- planning (pure) -----------------------------------------------------------------------
def plan_target_step(
    max_steps: int | None, epochs: int | None, steps_per_epoch: int | None
) -> tuple[int | None, str]:
    """The global step at which training ends, and why (max_steps wins over epochs)."""
    if max_steps is not None:
        return max_steps, "max_steps"
    if epochs is not None:
        if steps_per_epoch is None:
            raise UserError("train.epochs: the epoch length is unknown (a data.pipeline "
                            "function); set train.steps_per_epoch or train.max_steps")  # fmt: skip
        return epochs * steps_per_epoch, "epochs"
    return None, "max_time"


def plan_call_steps(
    step: int, steps_per_loop: int, target: int | None, checkpoint_every: int | None
) -> int:
    """Steps in the next call: steps_per_loop, cut at the target and at the next checkpoint
    boundary (so that checkpoints land on exact multiples of checkpoint.every_steps)."""
    n = steps_per_loop
    if target is not None:
        n = min(n, target - step)
    if checkpoint_every:
        n = min(n, checkpoint_every - step % checkpoint_every)
    return max(1, n)


def auto_steps_per_loop(step_seconds: float) -> int:
    if step_seconds <= 0 or not math.isfinite(step_seconds):
        return MAX_STEPS_PER_LOOP
    return max(1, min(MAX_STEPS_PER_LOOP, round(TARGET_CALL_SECONDS / step_seconds)))


# ---- the pieces ----------------------------------------------------------------------------
def _steps_per_epoch(cfg: RunConfig, global_batch: int) -> int | None:
    if cfg.train.steps_per_epoch:
        return cfg.train.steps_per_epoch
    if cfg.data.pipeline:
        return None
    from tfperf.data.pipeline import steps_per_epoch
    from tfperf.inputs.datasets import open_source

    src = open_source(cfg)
    return steps_per_epoch(src.records(cfg.data.train_split), global_batch)


def _record_bytes(cfg: RunConfig) -> int:
    if cfg.data.pipeline:
        return 0
    from tfperf.inputs.datasets import open_source

    src = open_source(cfg)
    split = src.manifest.splits.get(cfg.data.train_split)
    if split is None or not split.records:
        return 0
    return max(1, sum(s.bytes for s in split.shards) // split.records)


def _dataset_fn(cfg: RunConfig) -> Any:
    from tfperf.inputs.datasets import make_input_dataset

    def fn(input_context: Any) -> Any:
        return make_input_dataset(cfg, training=True, input_context=input_context,
                                  batch_size=cfg.pipeline.batch_size)  # fmt: skip

    return fn


def _element_spec(cfg: RunConfig) -> Any:
    """The batch structure, from a pipeline built (never iterated) in this process."""
    import tensorflow as tf

    return _dataset_fn(cfg)(tf.distribute.InputContext()).element_spec


def _workload(cfg: RunConfig) -> Any:
    if not cfg.workload:
        return None
    from tfperf.inputs.datasets import workload_of

    return workload_of(cfg)


@dataclass
class TrainParts:
    model: Any
    optimizer: Any
    step_var: Any
    train_step: TrainStep


def build_train_parts(
    cfg: RunConfig,
    info: StrategyInfo,
    policy: str,
    spec: Any,
    total: int | None,
    global_batch: int,
    *,
    print_tensors: Sequence[str] = (),
    before_optimizer: Any = None,
    metrics: bool = True,
) -> TrainParts:
    """Model, optimizer (loss-scaled for float16), step counter and train function, all
    created under `policy` and inside the strategy's scope. metrics=False leaves the
    metrics out of the train function (the doctor times the bare step)."""
    import keras
    import tensorflow as tf

    set_policy(policy)
    keras.utils.set_random_seed(cfg.train.seed)
    with info.strategy.scope():
        model, loss_fn, metric_fns = build_model_and_loss(cfg)
        optimizer = wrap_optimizer(make_optimizer(cfg, model, total, _workload(cfg)), policy)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    build_model_variables(info.strategy, model, optimizer, spec, before_optimizer)
    train_step = TrainStep(model, optimizer, loss_fn, metric_fns if metrics else {},
                           info.strategy, global_batch, step_var, print_tensors=print_tensors,
                           print_steps=cfg.train.print_steps)  # fmt: skip
    return TrainParts(model, optimizer, step_var, train_step)


def _run_call(info: StrategyInfo, train_step: TrainStep, iterator: Any, n: int) -> dict[str, float]:
    """One call of the train function; returns Python floats (which waits for the result)."""
    if info.coordinator is not None:
        out = train_step(iterator, n, coordinator=info.coordinator).fetch()
    else:
        out = train_step(iterator, n)
    return {k: float(v) for k, v in out.items()}


def _choose_precision(cfg: RunConfig, info: StrategyInfo, spec: Any, global_batch: int,
                      total: int | None) -> PrecisionChoice:  # fmt: skip
    import tensorflow as tf

    requested = cfg.train.precision
    if requested != "auto":
        return PrecisionChoice(requested)
    if info.coordinator is not None:
        return PrecisionChoice("float32", measured=False)  # remote workers: not measured here

    def trial(policy: str) -> Trial:
        parts = build_train_parts(cfg, info, policy, spec, total, global_batch)
        it = iter(distribute_input(info, _dataset_fn(cfg)))  # a throwaway iterator
        _run_call(info, parts.train_step, it, TRIAL_STEPS)  # trace, and let oneDNN/cuDNN
        # pick and cache their kernels; the fastest of a few timed calls resists noise
        # from other processes on the machine.
        best, loss = math.inf, math.nan
        for _ in range(TRIAL_CALLS):
            t0 = time.perf_counter()
            loss = _run_call(info, parts.train_step, it, TRIAL_STEPS)["loss"]
            best = min(best, (time.perf_counter() - t0) / TRIAL_STEPS)
        return Trial(policy, best, loss)

    # Each trial traces its own train function; TF's "excessive retracing" warning about
    # these separate functions would be misleading, so TF's logger is quiet meanwhile.
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        return choose_precision(supported_policies(), trial)
    finally:
        logger.setLevel(level)


def _optional_hooks(cfg: RunConfig, per_epoch: int | None) -> list[Hook]:
    hooks: list[Hook] = []
    if cfg.pipeline.on_corrupt == "skip" and per_epoch and not cfg.data.pipeline:
        from tfperf.train.corrupt import CorruptRecordsHook

        hooks.append(CorruptRecordsHook(cfg, per_epoch))
    if cfg.train.monitor_system:
        try:
            from tfperf.observe.system import SystemMonitorHook
        except ImportError:
            pass
        else:
            hooks.append(SystemMonitorHook(interval_s=1.0))
    return hooks


class ProgressHook(Hook):
    """A rich progress bar over steps (to stderr), with loss and examples/s."""

    def __init__(self, total: int | None):
        self.total = total
        self.progress: Any = None
        self.task: Any = None

    def on_train_begin(self, run: RunState) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn("train"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), console=Console(stderr=True), transient=False,
        )  # fmt: skip
        self.progress.start()
        self.task = self.progress.add_task("train", total=self.total, completed=run.step, info="")

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        info = f"loss {logs.get('loss', float('nan')):.4g}"
        if "step/examples_per_sec" in logs:
            info += f"  {logs['step/examples_per_sec']:.0f} ex/s"
        self.progress.update(self.task, completed=step, info=info)

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        if self.progress is not None:
            self.progress.stop()


def _say(progress: bool, message: str) -> None:
    if progress:
        from rich.console import Console

        Console(stderr=True).print(message, highlight=False, soft_wrap=True)


def _spawn_evaluator(cfg: RunConfig, overrides: Sequence[str]) -> Any:
    try:
        from tfperf.train.evaluator import spawn_evaluator
    except ImportError:
        raise UserError("--evaluator: this installation has no evaluator "
                        "(tfperf.train.evaluator)") from None  # fmt: skip
    if cfg.source is None:
        raise UserError("--evaluator: needs a run file (the evaluator reads the same one)")
    return spawn_evaluator(cfg.source, list(overrides))


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
    `overrides` are the --set values, passed on to the evaluator process."""
    import keras

    # The dtype policy is global in Keras: restore it so later models in this process
    # (an evaluator, a test) are not silently built in mixed precision.
    previous = keras.config.dtype_policy()
    try:
        with corrupt_shards_named(cfg):
            return _train(cfg, hooks, max_steps, evaluator, progress, overrides)
    finally:
        keras.config.set_dtype_policy(previous)


def _train(cfg: RunConfig, hooks: Sequence[Hook], max_steps: int | None, evaluator: bool,
           progress: bool, overrides: Sequence[str]) -> TrainResult:  # fmt: skip
    import tensorflow as tf

    dirs = run_dirs(cfg)
    info = make_strategy(cfg)
    global_batch = cfg.pipeline.batch_size * info.replicas
    per_epoch = _steps_per_epoch(cfg, global_batch) if (cfg.train.epochs or not (
        max_steps or cfg.train.max_steps or cfg.train.max_time)) else None  # fmt: skip
    epochs = cfg.train.epochs
    if epochs is None and not (max_steps or cfg.train.max_steps or cfg.train.max_time):
        epochs = 1  # nothing set: one epoch rather than forever
    target, target_reason = plan_target_step(max_steps or cfg.train.max_steps, epochs, per_epoch)
    spec = _element_spec(cfg)

    choice = _choose_precision(cfg, info, spec, global_batch, target)
    if choice.measured:
        _say(progress, choice.describe())

    restore_path = tf.train.latest_checkpoint(str(dirs.checkpoint_dir))
    warm_report: list[Any] = []

    def warm_start_hook(model: Any) -> None:
        if not cfg.train.init_from or restore_path:
            return  # a run's own checkpoint supersedes the warm start
        from tfperf.train.warm_start import warm_start

        path = cfg.resolve(cfg.train.init_from) or cfg.train.init_from
        warm_report.append(warm_start(model, path, cfg.train.freeze))

    parts = build_train_parts(cfg, info, choice.policy, spec, target, global_batch,
                   print_tensors=cfg.train.print_tensors,
                   before_optimizer=warm_start_hook)  # fmt: skip
    if warm_report and progress:
        from rich.console import Console

        Console(stderr=True).print(warm_report[0])

    dist = distribute_input(info, _dataset_fn(cfg), checkpointable=cfg.train.checkpoint_input)
    iterator = iter(dist)
    # Under multi_worker and parameter_server TF cannot save the input position
    # (tensorflow#56372): a resumed run restarts its input there.
    saved_input = checkpointable_iterator(iterator) if cfg.train.checkpoint_input else None
    save_iterator = saved_input is not None
    if cfg.train.checkpoint_input and not save_iterator:
        _say(progress, f"note: TensorFlow cannot checkpoint the input iterator under "
             f"{info.kind}; a resumed run restarts its input pipeline")  # fmt: skip
    if save_iterator and cfg.pipeline.shuffle_buffer > 1:
        warn_if_iterator_large(cfg.pipeline.shuffle_buffer, _record_bytes(cfg))
    ckpt = make_checkpoint(parts.model, parts.optimizer, parts.step_var, saved_input)
    if restore_path:
        ckpt.restore(restore_path).expect_partial()
        _say(True, f"resumed from {restore_path} (step {int(parts.step_var.numpy())})")
    scratch = None
    if info.is_chief:
        dirs.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        manager = make_manager(ckpt, dirs.checkpoint_dir, cfg.train.checkpoint.keep)
        clear_final(dirs.checkpoint_dir)
    else:
        # Non-chief workers take part in the (collective) save into a scratch folder.
        scratch = dirs.out_dir / "worker_scratch" / f"{info.task_type}_{info.task_id}"
        manager = make_manager(ckpt, scratch, 1)
    every_seconds = cfg.train.checkpoint.every_seconds if info.kind != "multi_worker" else None
    ckpt_hook = CheckpointHook(manager, cfg.train.checkpoint.every_steps, every_seconds,
                               scratch_dir=scratch)  # fmt: skip

    step = int(parts.step_var.numpy())
    writer = make_writer(dirs.train_logs, enabled=info.is_chief)
    run = RunState(cfg=cfg, model=parts.model, optimizer=parts.optimizer,
                   strategy=info.strategy, step=step, out_dir=dirs.out_dir, train_writer=writer,
                   examples_per_step=global_batch, checkpoint_dir=dirs.checkpoint_dir,
                   log_dir=dirs.log_dir, is_chief=info.is_chief, precision=choice.policy,
                   iterator=iterator if info.coordinator is None else None,
                   train_step=parts.train_step)  # fmt: skip
    run.extra["strategy_info"] = info
    all_hooks: list[Hook] = [NanCheck(), ckpt_hook, SummaryHook(cfg.train.log_every,
                             cfg.train.histogram_every)]  # fmt: skip
    per_epoch_known = per_epoch
    if per_epoch_known is None and cfg.pipeline.on_corrupt == "skip":
        per_epoch_known = _steps_per_epoch(cfg, global_batch)  # for the epoch-end report
    all_hooks += _optional_hooks(cfg, per_epoch_known)
    if progress and info.is_chief:
        all_hooks.append(ProgressHook(target))
    all_hooks += list(hooks)
    hook_list = HookList(all_hooks)

    child = _spawn_evaluator(cfg, overrides) if evaluator and info.is_chief else None
    meter = FeedMeter()
    start_step = step
    fixed_spl = cfg.train.steps_per_loop if cfg.train.steps_per_loop != "auto" else None
    spl = fixed_spl or 1  # auto: one compiling step, then a probe, then the measured value
    deadline = time.monotonic() + cfg.train.max_time if cfg.train.max_time else None
    calls = 0
    best_step = math.inf
    logs: dict[str, float] = {}
    last_snapshot: PipelineSnapshot | None = None
    try:
        with StopOnSignal(run):
            hook_list.on_train_begin(run)
            while run.stop_reason is None:
                if target is not None and step >= target:
                    run.stop_reason = target_reason
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    run.stop_reason = "max_time"
                    break
                n = plan_call_steps(step, spl, target, cfg.train.checkpoint.every_steps)
                hook_list.on_loop_begin(run, step)
                t0 = time.perf_counter()
                out = _run_call(info, parts.train_step, iterator, n)
                wall = time.perf_counter() - t0
                first, step = step + 1, step + n
                run.step = step
                calls += 1
                if calls > 1 or target == step:  # the first call compiles: not timed
                    meter.add(out["wait_s"], wall, n)
                if fixed_spl is None and calls == 1:
                    spl = PROBE_STEPS
                elif fixed_spl is None:
                    # The fastest step seen so far: one slow call (another process on the
                    # machine) must not pin a short loop for the whole run.
                    best_step = min(best_step, wall / n)
                    spl = auto_steps_per_loop(best_step)
                logs = _call_logs(out, first, n, wall, global_batch, parts.optimizer)
                snap = pipeline_snapshot(iterator) if info.coordinator is None else None
                if snap is not None:
                    last_snapshot = snap
                    logs["input/buffered"] = float(snap.buffered)
                    meter.add_buffered(snap.buffered)
                    for i, s in enumerate(snap.stages):
                        logs[f"input/stage_us/{i:02d}_{s.name}"] = s.us_per_element
                hook_list.on_loop_end(run, step, logs)
            if run.stop_reason == "signal":
                _say(True, f"{run.extra.get('signal', 'signal')}: saving a checkpoint at "
                     f"step {step} and stopping; run the same command to resume")  # fmt: skip
    finally:
        try:
            hook_list.on_train_end(run, logs)
        finally:
            _finish_evaluator(child, normal=run.stop_reason in CheckpointHook.NORMAL_ENDS)
    if run.stop_reason == "nan":
        raise NonFiniteLossError(run.extra["nan_message"])
    return TrainResult(
        steps=step,
        examples_per_sec=meter.steps * global_batch / meter.wall_s if meter.wall_s else 0.0,
        input_bound_fraction=meter.wait_fraction,
        wait_ms_mean=meter.wait_ms_mean,
        final_loss=logs.get("loss", math.nan),
        out_dir=dirs.out_dir,
        checkpoint_dir=dirs.checkpoint_dir,
        log_dir=dirs.log_dir,
        precision=choice.policy,
        strategy=info.kind,
        stopped_because=run.stop_reason or "unknown",
        start_step=start_step,
        restored_from=restore_path,
        steps_per_loop=spl,
        global_batch=global_batch,
        precision_detail=choice.describe(),
        metrics={k: v for k, v in logs.items() if k.startswith("metrics/")},
        buffered_mean=meter.buffered_mean,
        pipeline=last_snapshot,
        checkpoint=run.extra.get("checkpoint"),
    )


class NanCheck(Hook):
    """Marks the run as diverged at the first non-finite loss; the checkpoint hook then keeps
    the last good checkpoint and the loop raises NonFiniteLossError naming the steps."""

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(loss) and run.stop_reason != "nan":
            first = int(logs.get("first_step", step))
            run.stop_reason = "nan"
            run.extra["nan_message"] = (
                f"loss is {loss} in the loop call covering steps {first}-{step}; the last "
                "good checkpoint was kept. Lower model.learning_rate, check the data for "
                "NaN/Inf, or use train.precision=float32"
            )


def _call_logs(out: dict[str, float], first: int, n: int, wall: float, global_batch: int,
               optimizer: Any) -> dict[str, float]:  # fmt: skip
    logs = {"loss": out["loss"], "first_step": float(first), "steps": float(n)}
    logs.update({k: v for k, v in out.items() if k.startswith("metrics/")})
    try:
        logs["learning_rate"] = float(optimizer.learning_rate)
    except (TypeError, ValueError):
        pass
    logs["step/time_ms"] = 1e3 * wall / n
    logs["step/examples_per_sec"] = n * global_batch / wall if wall > 0 else 0.0
    logs["input/wait_ms"] = 1e3 * out["wait_s"] / n
    logs["input/wait_fraction"] = min(1.0, out["wait_s"] / wall) if wall > 0 else 0.0
    return logs


def _finish_evaluator(child: Any, *, normal: bool) -> None:
    """After a normal end the evaluator sees FINAL, evaluates the last checkpoint and exits;
    otherwise it would watch forever, so it is stopped."""
    if child is None:
        return
    import subprocess

    if normal:
        try:
            child.wait(timeout=600)
            return
        except subprocess.TimeoutExpired:
            pass
    child.terminate()
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()


def print_summary(result: TrainResult, console: Any = None) -> None:
    """The end-of-run table: throughput, input wait, precision, strategy, stages."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(stderr=True)
    t = Table(title=f"training ({result.stopped_because})", show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("steps", f"{result.start_step} -> {result.steps} (global batch "
              f"{result.global_batch}, {result.steps_per_loop} steps per call)")  # fmt: skip
    t.add_row("final loss", f"{result.final_loss:.6g}")
    for k, v in result.metrics.items():
        t.add_row(k, f"{v:.6g}")
    t.add_row("examples/s", f"{result.examples_per_sec:,.0f}")
    wait = f"{result.wait_ms_mean:.2f} ms/step, {100 * result.input_bound_fraction:.1f}%"
    t.add_row("input wait", f"{wait} of the time (input-bound fraction)")
    if result.buffered_mean is not None:
        t.add_row("prefetch buffer", f"{result.buffered_mean:.1f} batches on average")
    t.add_row("precision", (result.precision_detail or result.precision).removeprefix("precision "))
    t.add_row("strategy", result.strategy)
    t.add_row("checkpoint", str(result.checkpoint or result.checkpoint_dir))
    t.add_row("TensorBoard", f"tensorboard --logdir {result.log_dir}")
    console.print(t)
    if result.pipeline is not None and result.pipeline.stages:
        s = Table(title="input pipeline (tf.data's model, output first)")
        for col in ("stage", "us/element", "elements", "parallelism", "buffered"):
            s.add_column(col)
        for st in result.pipeline.stages:
            par = "" if st.parallelism is None else f"{st.parallelism:g}"
            s.add_row(st.name, f"{st.us_per_element:.1f}", str(st.elements), par,
                      str(st.buffered))  # fmt: skip
        console.print(s)


@dataclass(frozen=True)
class ComputeLimit:
    """What the model alone can do: examples/s fed one cached batch, and the process's CPU
    time (all threads) per example meanwhile."""

    examples_per_sec: float
    cpu_us_per_example: float
    precision: str
    steps: int


def compute_limit(cfg: RunConfig, *, steps: int = 200, precision: str | None = None,
                  steps_per_loop: int = 50) -> ComputeLimit:  # fmt: skip
    """The run file's model and train function fed one batch cached in memory (input costs
    ~nothing), one device, after a warm-up call.

    A run is "near the limit" when its end-to-end examples/s is close to this rate; the
    CPU time per example shows what the input adds on a machine whose cores it shares.
    """
    import keras
    import tensorflow as tf

    previous = keras.config.dtype_policy()
    try:
        info = StrategyInfo(tf.distribute.get_strategy(), "one_device", 1)
        policy = precision or (cfg.train.precision if cfg.train.precision != "auto" else None)
        spec = _element_spec(cfg)
        if policy is None:
            policy = _choose_precision(cfg, info, spec, cfg.pipeline.batch_size, None).policy
        parts = build_train_parts(cfg, info, policy, spec, None, cfg.pipeline.batch_size)
        source = iter(_dataset_fn(cfg)(tf.distribute.InputContext()))
        batch = next(source)
        del source  # stop its background threads: the limit must not share the CPU with them
        it = iter(tf.data.Dataset.from_tensors(batch).repeat())
        _run_call(info, parts.train_step, it, steps_per_loop)  # trace and warm up
        done, t0, cpu0 = 0, time.perf_counter(), time.process_time()
        while done < steps:
            n = min(steps_per_loop, steps - done)
            _run_call(info, parts.train_step, it, n)
            done += n
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        examples = steps * cfg.pipeline.batch_size
        return ComputeLimit(examples / wall, 1e6 * cpu / examples, policy, steps)
    finally:
        keras.config.set_dtype_policy(previous)


def measure_compute_limit(cfg: RunConfig, *, steps: int = 200, precision: str | None = None,
                          steps_per_loop: int = 50) -> float:  # fmt: skip
    """The compute limit in examples/s (see `compute_limit`)."""
    return compute_limit(cfg, steps=steps, precision=precision,
                         steps_per_loop=steps_per_loop).examples_per_sec  # fmt: skip
