"""Everything a training run needs before its first step, built into one `TrainSession`:
the strategy, train.out_dir held (its lock), where training ends, the precision (measured
for `precision: auto`), the model checked against the data, optimizer and compiled
TrainStep (train/parts.py), the distributed input iterator (train/run_input.py), the
checkpoint restored (or a warm start), and the list of hooks. Running it is train/loop.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tfperf.config import RunConfig
from tfperf.data.pipeline_sizes import steps_per_epoch as records_to_steps
from tfperf.errors import UserError
from tfperf.hooks import Hook, HookList, RunState
from tfperf.inputs.datasets import open_source
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
from tfperf.train.checkpoints.other_input import reader, restarted_note
from tfperf.train.checkpoints.save import CheckpointHook, make_checkpoint, make_manager
from tfperf.train.checkpoints.stale import remove_stale
from tfperf.train.corrupt import CorruptRecordsHook
from tfperf.train.parts import TrainParts, build_train_parts, pick_precision
from tfperf.train.precision import (
    PrecisionChoice,
)
from tfperf.train.run_hooks import NanCheck, ProgressHook
from tfperf.train.run_input import (
    built_input,
    epoch_counter,
    first_of,
    input_seeded_by_step,
    training_input,
)
from tfperf.train.service_watch import service_watch
from tfperf.train.strategy import StrategyInfo, make_strategy
from tfperf.train.warm_start import warm_start

if TYPE_CHECKING:
    import keras


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


def _restore(
    cfg: RunConfig, ckpt: Any, parts: TrainParts, own: list[str], dirs: RunDirs, info: StrategyInfo
) -> tuple[str, bool]:
    """Restores the newest checkpoint that reads; the chief moves damaged newer ones aside.
    Returns (its path, whether the input iterator was restored): one holding another
    pipeline's iterator restores the rest under train.restore_input (other_input.py)."""
    bare = make_checkpoint(parts.model, parts.optimizer, parts.step_var)
    where = cfg.origin("train.restore_input")
    path, restored_input, damaged = read_newest(
        own,
        reader(bare, getattr(ckpt, "iterator", None), cfg.train.restore_input, where),
        purpose="resuming",
        fix=f"move {dirs.checkpoint_dir} away to train from step 0",
    )
    if damaged and info.is_chief:
        aside = set_aside(dirs.checkpoint_dir, [p for p, _ in damaged], path)
        say(True, f"moved the damaged checkpoint(s) to {aside}")
    return path, restored_input


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
    built = built_input(cfg)  # its spec now; read by training below when nothing changes it
    spec = built.element_spec
    # One real batch, pulled at most once, for the batch size and every model check below.
    sample = first_of(built)
    global_batch = per_replica_batch(cfg, spec, sample) * info.replicas
    target, target_reason = _plan(cfg, max_steps, global_batch)
    choice = pick_precision(cfg, info, spec, target, sample)
    if choice.measured:
        say(progress, choice.describe())

    own = resume_candidates(dirs.checkpoint_dir)
    restore_path = own[-1] if own else None
    warm_report: list[Any] = []

    def warm_start_hook(model: keras.Model) -> None:
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
        training_input(cfg, info, progress, counter, built)
        if cfg.train.checkpoint_input
        else (None, None)
    )
    ckpt = make_checkpoint(parts.model, parts.optimizer, parts.step_var, saved_input)
    if own:
        restore_path, restored_input = _restore(cfg, ckpt, parts, own, dirs, info)
        step = int(parts.step_var.numpy())
        if saved_input is not None and not restored_input:
            # A fresh iterator from the pipeline's beginning (a failed restore may have
            # touched the old one), and the checkpoint saves that one from now on.
            iterator, saved_input = training_input(cfg, info, progress, counter)
            ckpt = make_checkpoint(parts.model, parts.optimizer, parts.step_var, saved_input)
            if cfg.train.restore_input == "auto":
                say(True, restarted_note(restore_path, step))
            else:
                say(
                    True,
                    f"resumed from {restore_path} (step {step}; train.restore_input: "
                    "skip, the input starts from its beginning)",
                )
        else:
            say(True, f"resumed from {restore_path} (step {step})")
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
