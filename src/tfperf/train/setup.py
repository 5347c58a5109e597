"""Everything a training run needs before its first step, built into one `TrainSession`:
the strategy, train.out_dir held (its lock), where training ends, the precision (measured
for `precision: auto`), the model checked against the data, optimizer and compiled
TrainStep, the distributed input iterator (train/run_input.py), the checkpoint restored
(or a warm start), and the list of hooks. Running it is train/loop.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tfperf.config import RunConfig
from tfperf.data.pipeline import steps_per_epoch as records_to_steps
from tfperf.errors import UserError
from tfperf.hooks import Hook, HookList, RunState
from tfperf.inputs.datasets import open_source, workload_of
from tfperf.observe.summaries import SummaryHook, make_writer
from tfperf.observe.system import SystemMonitorHook
from tfperf.train.checkpoints.damaged import read_newest, set_aside
from tfperf.train.checkpoints.folder import (
    RunDirs,
    checkpoint_step,
    clear_final,
    hold_out_dir,
    listed_checkpoints,
    run_dirs,
)
from tfperf.train.checkpoints.save import CheckpointHook, make_checkpoint, make_manager
from tfperf.train.checkpoints.stale import remove_stale
from tfperf.train.corrupt import CorruptRecordsHook
from tfperf.train.fit_check import check_fit
from tfperf.train.model import build_model_and_loss, build_model_variables, make_optimizer
from tfperf.train.precision import (
    PrecisionChoice,
    PrecisionTrial,
    choose_precision,
    set_policy,
    supported_policies,
    wrap_optimizer,
)
from tfperf.train.run_hooks import NanCheck, ProgressHook
from tfperf.train.run_input import (
    dataset_fn,
    element_spec,
    epoch_counter,
    first_batch,
    input_seeded_by_step,
    training_input,
)
from tfperf.train.service_watch import service_watch
from tfperf.train.step import TrainStep
from tfperf.train.strategy import StrategyInfo, distribute_input, make_strategy
from tfperf.train.warm_start import warm_start
from tfperf.train.xla import host_accelerators, resolve_jit_compile

TRIAL_STEPS = 8  # steps per timed call when `precision: auto` measures a policy
TRIAL_CALLS = 3  # timed calls per policy (the fastest counts)


def say(show: bool, message: str) -> None:
    """One line on stderr (kept whole: paths stay greppable), when `show`."""
    if show:
        Console(stderr=True).print(message, highlight=False, soft_wrap=True)


# ---- where training ends (pure) -------------------------------------------------------------
def plan_target_step(
    max_steps: int | None, epochs: int | None, steps_per_epoch: int | None
) -> tuple[int | None, str]:
    """The global step at which training ends, and why (max_steps wins over epochs)."""
    if max_steps is not None:
        return max_steps, "max_steps"
    if epochs is not None:
        if steps_per_epoch is None:
            raise UserError(
                "train.epochs: the epoch length is unknown (a data.pipeline function); set "
                "train.steps_per_epoch or train.max_steps"
            )
        return epochs * steps_per_epoch, "epochs"
    return None, "max_time"


# ---- the input ------------------------------------------------------------------------------
def steps_per_epoch(cfg: RunConfig, global_batch: int) -> int | None:
    """train.steps_per_epoch, else the train split's records over the global batch (None
    for a user's data.pipeline, whose length is unknown)."""
    if cfg.train.steps_per_epoch:
        return cfg.train.steps_per_epoch
    if cfg.data.pipeline:
        return None
    src = open_source(cfg)
    return records_to_steps(src.records(cfg.data.train_split), global_batch)


# ---- model, optimizer and train function ---------------------------------------------------
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
    *,
    print_tensors: Sequence[str] = (),
    before_optimizer: Any = None,
    metrics: bool = True,
    sample: Callable[[], Any] | None = None,
) -> TrainParts:
    """Model, optimizer (loss-scaled for float16), step counter and train function, all
    created under `policy` and inside the strategy's scope. metrics=False leaves the
    metrics out of the train function (the doctor times the bare step). `sample()` gives
    one real batch for the model check (default: the run file's first training batch)."""
    import keras
    import tensorflow as tf

    set_policy(policy)
    keras.utils.set_random_seed(cfg.train.seed)
    workload = workload_of(cfg) if cfg.workload else None
    with info.strategy.scope():
        model, loss_fn, metric_fns = build_model_and_loss(cfg)
        # Builds the model on zeros and checks it against the batches (inputs, output, labels).
        check_fit(cfg, model, spec, [loss_fn, *metric_fns.values()], sample or first_batch(cfg))
        optimizer = wrap_optimizer(make_optimizer(cfg, model, total, workload), policy)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    build_model_variables(info.strategy, model, optimizer, spec, before_optimizer)
    jit = resolve_jit_compile(
        cfg.train.jit_compile,
        model,
        info.kind,
        host_accelerators(),
        printing=bool([n for n in print_tensors if n]),
    )
    train_step = TrainStep(
        model,
        optimizer,
        loss_fn,
        metric_fns if metrics else {},
        info.strategy,
        step_var,
        print_tensors=print_tensors,
        print_steps=cfg.train.print_steps,
        jit=jit,
    )
    return TrainParts(model, optimizer, step_var, train_step)


def run_call(info: StrategyInfo, train_step: TrainStep, iterator: Any, n: int) -> dict[str, float]:
    """One call of the train function (scheduled on a worker under parameter_server);
    returns Python floats, loss and wait_s among them (which waits for the result)."""
    import tensorflow as tf

    try:
        if info.coordinator is not None:
            out = train_step(iterator, n, coordinator=info.coordinator).fetch()
        else:
            out = train_step(iterator, n)
    except tf.errors.OutOfRangeError:
        raise UserError(
            f"training: the input ran out at step {int(train_step.step_var.numpy())}, before "
            "train.max_steps: the pipeline returns finitely many batches and pipeline.repeat is "
            "false (training repeats the input unless it is); set pipeline.repeat: true or a "
            "lower train.max_steps. Checkpoints already written are kept"
        ) from None
    return {k: float(v) for k, v in out.items()}


def pick_precision(
    cfg: RunConfig,
    info: StrategyInfo,
    spec: Any,
    total: int | None,
    sample: Callable[[], Any] | None = None,
) -> PrecisionChoice:
    """train.precision, or for `auto` the fastest policy with a finite loss, each timed on
    the real train step and input (the fastest of a few calls, after a warm-up call);
    `sample()`: the real batch each trial's model check may need (first_batch)."""
    import tensorflow as tf

    requested = cfg.train.precision
    if requested != "auto":
        return PrecisionChoice(requested)
    if info.coordinator is not None:
        return PrecisionChoice("float32", measured=False)  # remote workers: not measured here

    def trial(policy: str) -> PrecisionTrial:
        parts = build_train_parts(cfg, info, policy, spec, total, sample=sample)
        it = iter(distribute_input(info, dataset_fn(cfg)))  # a throwaway iterator
        # Traces, and lets oneDNN/cuDNN pick and cache their kernels; the fastest of a few
        # timed calls resists noise from other processes on the machine.
        run_call(info, parts.train_step, it, TRIAL_STEPS)
        best, loss = math.inf, math.nan
        for _ in range(TRIAL_CALLS):
            t0 = time.perf_counter()
            loss = run_call(info, parts.train_step, it, TRIAL_STEPS)["loss"]
            best = min(best, (time.perf_counter() - t0) / TRIAL_STEPS)
        return PrecisionTrial(policy, best, loss)

    # Each trial traces its own train function; TF's "excessive retracing" warning about
    # these separate functions would be misleading, so TF's logger is quiet meanwhile.
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        return choose_precision(supported_policies(), trial)
    finally:
        logger.setLevel(level)


# ---- the session ----------------------------------------------------------------------------
@dataclass
class TrainSession:
    """One run, ready to go: `run` (the hooks' view) holds model, optimizer and step."""

    cfg: RunConfig
    dirs: RunDirs
    info: StrategyInfo
    parts: TrainParts
    iterator: Any
    run: RunState
    hooks: HookList
    choice: PrecisionChoice
    global_batch: int
    target: int | None  # the global step at which training ends (None: max_time only)
    target_reason: str  # max_steps | epochs | max_time
    restore_path: str | None  # the run's own checkpoint it resumed from
    progress: bool = True  # progress bar and notes on stderr


def _plan(cfg: RunConfig, max_steps: int | None, global_batch: int) -> tuple[int | None, str]:
    limited = max_steps or cfg.train.max_steps or cfg.train.max_time
    per_epoch = steps_per_epoch(cfg, global_batch) if cfg.train.epochs or not limited else None
    epochs = cfg.train.epochs
    if epochs is None and not limited:
        epochs = 1  # nothing set: one epoch rather than forever
    return plan_target_step(max_steps or cfg.train.max_steps, epochs, per_epoch)


def _checkpoint_hook(
    cfg: RunConfig, info: StrategyInfo, dirs: RunDirs, ckpt: Any
) -> CheckpointHook:
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
    return CheckpointHook(
        manager, cfg.train.checkpoint.every_steps, every_seconds, scratch_dir=scratch
    )


def _hooks(
    cfg: RunConfig,
    info: StrategyInfo,
    ckpt_hook: CheckpointHook,
    target: int | None,
    global_batch: int,
    progress: bool,
    user_hooks: Sequence[Hook],
) -> HookList:
    """NaN check first (a diverged call is never saved), checkpoints, summaries, the
    optional hooks, progress, then the caller's."""
    hooks: list[Hook] = [
        NanCheck(),
        ckpt_hook,
        SummaryHook(cfg.train.log_every, cfg.train.histogram_every),
    ]
    if cfg.pipeline.on_corrupt == "skip" and not cfg.data.pipeline:
        per_epoch = steps_per_epoch(cfg, global_batch)  # for the epoch-end report
        if per_epoch:
            hooks.append(CorruptRecordsHook(cfg, per_epoch))
    if cfg.train.monitor_system:
        hooks.append(SystemMonitorHook(interval_s=1.0))
    if progress and info.is_chief:
        hooks.append(ProgressHook(target))
    return HookList([*hooks, *user_hooks])


def resume_candidates(checkpoint_dir: Path) -> list[str]:
    """The run's own checkpoints a resume may start from, oldest first: listed in the
    manager's state file with their .index on disk (whether they read is tried later)."""
    listed = [p for p in listed_checkpoints(checkpoint_dir) if Path(f"{p}.index").exists()]
    return sorted(listed, key=lambda p: checkpoint_step(p) or 0)


def _restore(ckpt: Any, own: list[str], dirs: RunDirs, info: StrategyInfo) -> str:
    """Restores the newest checkpoint that reads; the chief moves damaged newer ones aside."""
    path, _, damaged = read_newest(
        own,
        lambda p: ckpt.restore(p).expect_partial(),
        purpose="resuming",
        fix=f"move {dirs.checkpoint_dir} away to train from step 0",
    )
    if damaged and info.is_chief:
        aside = set_aside(dirs.checkpoint_dir, [p for p, _ in damaged], path)
        say(True, f"moved the damaged checkpoint(s) to {aside}")
    return path


def per_replica_batch(cfg: RunConfig, spec: Any, sample: Callable[[], Any]) -> int:
    """The batch each replica's dataset yields: its static leading dimension, else for a
    user's pipeline (which may batch other than pipeline.batch_size) the rows of the real
    batch `sample()` gives, else pipeline.batch_size."""
    import tensorflow as tf

    from tfperf.measure import leading_dim

    flat = [s for s in tf.nest.flatten(spec) if getattr(s, "shape", None) is not None]
    shape = flat[0].shape if flat else None
    if shape is not None and shape.rank and shape[0] is not None:
        return int(shape[0])
    if cfg.data.pipeline:
        batch = sample()
        if batch is not None:
            return max(1, leading_dim(batch))
    return cfg.pipeline.batch_size


def prepare(
    cfg: RunConfig,
    *,
    hooks: Sequence[Hook] = (),
    max_steps: int | None = None,
    progress: bool = True,
    held: ExitStack | None = None,
) -> TrainSession:
    """Builds the run; restores {train.out_dir}/checkpoints' latest checkpoint, else warm
    starts from train.init_from. `max_steps` (a global step) overrides train.max_steps.
    The chief holds train.out_dir's lock until `held` closes (none without it)."""
    dirs = run_dirs(cfg)
    info = make_strategy(cfg)
    if held is not None and info.is_chief:  # other workers write only their scratch folder
        hold_out_dir(held, cfg, dirs)
        for p in remove_stale(dirs.out_dir, dirs.checkpoint_dir, holding=True):
            say(True, f"removed {p}, left by a process killed while writing it")
    spec = element_spec(cfg)
    # One real batch, pulled at most once, for the batch size and every model check below.
    sample = first_batch(cfg)
    global_batch = per_replica_batch(cfg, spec, sample) * info.replicas
    target, target_reason = _plan(cfg, max_steps, global_batch)
    choice = pick_precision(cfg, info, spec, target, sample)
    if choice.measured:
        say(progress, choice.describe())

    own = resume_candidates(dirs.checkpoint_dir)
    restore_path = own[-1] if own else None
    warm_report: list[Any] = []

    def warm_start_hook(model: Any) -> None:
        if not cfg.train.init_from or restore_path:
            return  # a run's own checkpoint supersedes the warm start
        path = cfg.resolve(cfg.train.init_from) or cfg.train.init_from
        warm_report.append(warm_start(model, path, cfg.train.freeze))

    parts = build_train_parts(
        cfg,
        info,
        choice.policy,
        spec,
        target,
        print_tensors=cfg.train.print_tensors,
        before_optimizer=warm_start_hook,
        sample=sample,
    )
    if warm_report and progress:
        Console(stderr=True).print(warm_report[0])

    counter = epoch_counter(cfg, info) if cfg.pipeline.service.on else None
    # Without checkpoint_input the input is built after the restore: its seed follows the step.
    iterator, saved_input = (
        training_input(cfg, info, progress, counter) if cfg.train.checkpoint_input else (None, None)
    )
    ckpt = make_checkpoint(parts.model, parts.optimizer, parts.step_var, saved_input)
    if own:
        restore_path = _restore(ckpt, own, dirs, info)
        say(True, f"resumed from {restore_path} (step {int(parts.step_var.numpy())})")
    if iterator is None:
        step = int(parts.step_var.numpy())
        iterator, _ = training_input(input_seeded_by_step(cfg, step), info, progress, counter)
    ckpt_hook = _checkpoint_hook(cfg, info, dirs, ckpt)

    run = RunState(
        cfg=cfg,
        model=parts.model,
        optimizer=parts.optimizer,
        strategy=info.strategy,
        step=int(parts.step_var.numpy()),
        out_dir=dirs.out_dir,
        train_writer=make_writer(dirs.train_logs, enabled=info.is_chief),
        examples_per_step=global_batch,
        checkpoint_dir=dirs.checkpoint_dir,
        log_dir=dirs.log_dir,
        is_chief=info.is_chief,
        precision=choice.policy,
        iterator=iterator if info.coordinator is None else None,
        train_step=parts.train_step,
        strategy_info=info,
    )
    if cfg.pipeline.service.on:
        hooks = [service_watch(cfg, counter), *hooks]
    hook_list = _hooks(cfg, info, ckpt_hook, target, global_batch, progress, hooks)
    return TrainSession(
        cfg=cfg,
        dirs=dirs,
        info=info,
        parts=parts,
        iterator=iterator,
        run=run,
        hooks=hook_list,
        choice=choice,
        global_batch=global_batch,
        target=target,
        target_reason=target_reason,
        restore_path=restore_path,
        progress=progress,
    )
