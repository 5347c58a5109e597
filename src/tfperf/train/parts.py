"""The model, optimizer and compiled train function of a run (`TrainParts`), built under a
precision policy inside the strategy's scope; one call of the train function (`run_call`);
and `precision: auto`'s choice, each policy timed on the real step and input
(`pick_precision`). train/setup.py builds the session around them; the compute limit and
the doctor build them alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.inputs.datasets import workload_of
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
from tfperf.train.run_input import dataset_fn, first_batch
from tfperf.train.step import TrainStep
from tfperf.train.strategy import StrategyInfo, distribute_input
from tfperf.train.xla import host_accelerators, resolve_jit_compile

if TYPE_CHECKING:
    import keras

TRIAL_STEPS = 8  # steps per timed call when `precision: auto` measures a policy
TRIAL_CALLS = 3  # timed calls per policy (the fastest counts)


@dataclass
class TrainParts:
    model: keras.Model
    optimizer: keras.Optimizer
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
        # The doctor times the bare step: it never reads the metrics (AUC's among them).
        model, wanted = build_model_and_loss(cfg, metrics=metrics)
        # Builds the model on zeros, checks it against the batches (inputs, outputs, labels)
        # and pairs the outputs with the labels, losses and metrics.
        objectives = check_fit(
            cfg, model, spec, wanted, sample or first_batch(cfg), metrics=metrics
        )
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
        objectives,
        {},
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
