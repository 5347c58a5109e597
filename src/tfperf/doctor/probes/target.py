"""What the doctor times, on the shared measuring core `tfperf.measure`: the run file's model
behind tfperf's compiled train step, or a user's own training step (step_fn.py) as
`tfperf.optimize(ds, step=fn)` hands it (`StepTarget`), and the three kinds of probes sized by
the run file's `doctor` section (each repeat: `warmup` untimed steps, then at least `steps`
steps and `min_seconds`): a pipeline alone, the compute limit, training.

It builds probes and runs nothing; diagnosis/ and fix/ run them side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.config import DoctorConfig, RunConfig
from tfperf.doctor.probes import handed
from tfperf.doctor.probes.step_fn import StepFn
from tfperf.errors import UserError
from tfperf.measure import Probe, StepRunner, cached_batch, pipeline_probe, training_probe

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from tfperf.train.step import TrainStep


@dataclass
class StepTarget:
    """A model, optimizer and the real compiled multi-step train function, built once; or a
    user's own step (`step`), called from Python as the user's loop calls it."""

    model: keras.Model | None
    train_step: TrainStep | None
    precision: str
    batch: int
    step: StepFn | None = None

    @property
    def name(self) -> str:
        if self.step is not None:
            return self.step.name
        return str(getattr(self.model, "name", type(self.model).__name__))

    @property
    def run_steps(self) -> StepRunner:
        """`n` train steps from an iterator; the seconds they waited for input."""
        if self.step is not None:
            return self.step.run_fed
        step = self.train_step
        assert step is not None

        def run(it: Any, n: int) -> tuple[float, int]:
            out = step(it, n)  # reading the result waits for the compiled call to finish
            return float(out["wait_s"]), int(out["examples"])

        return run

    @property
    def run_cached(self) -> StepRunner | None:
        """A user's step on one batch held in memory (None: the compiled step is fed
        `cached_batch`, which stays inside the graph)."""
        return self.step.run_cached if self.step is not None else None


def local_accelerators() -> int:
    """This host's GPUs (logical devices), else its TPU cores; 0 on a CPU-only host."""
    import tensorflow as tf

    return len(tf.config.list_logical_devices("GPU")) or len(tf.config.list_logical_devices("TPU"))


def devices_used(cfg: RunConfig) -> int:
    """The local accelerators the run trains on: all of them under mirrored (or auto, which
    resolves to mirrored with several GPUs) and multi-worker, else one."""
    from tfperf.train.strategy import resolve_kind

    if resolve_kind(cfg.train.strategy) in ("mirrored", "multi_worker"):
        return max(1, local_accelerators())
    return 1


def on_accelerator() -> bool:
    """Whether the model's step runs on a GPU (or TPU) rather than on the host's CPU cores:
    the cost model then lets input and model overlap without sharing cores."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def build_target(
    cfg: RunConfig,
    element_spec: Any,
    batch: int,
    precision: str | None = None,
    sample: Callable[[], Any] | None = None,
) -> StepTarget:
    """The run file's model and loss behind tfperf's TrainStep, under `precision`;
    `sample()` gives a real batch of the timed dataset (run_input.first_of). A step handed
    to `tfperf.optimize(ds, step=fn)` is its own target."""
    step = handed.step_of(cfg.model.name)
    if step is not None:
        return StepTarget(None, None, "the step's own", batch, step=step)
    # TensorFlow and the train loop are imported on first use so that `tfperf --help`
    # stays fast.
    import keras
    import tensorflow as tf

    from tfperf.train.parts import build_train_parts
    from tfperf.train.strategy import StrategyInfo

    if not isinstance(element_spec, tuple) or len(element_spec) not in (2, 3):
        raise UserError(
            "data.pipeline: the doctor trains on (features, labels) batches; the dataset "
            f"yields {element_spec}"
        )
    policy = precision or (cfg.train.precision if cfg.train.precision != "auto" else "float32")
    before = keras.config.dtype_policy()
    try:
        info = StrategyInfo(tf.distribute.get_strategy(), "one_device", 1)
        parts = build_train_parts(
            cfg, info, policy, element_spec, None, metrics=False, sample=sample
        )
    finally:
        keras.config.set_dtype_policy(before)
    return StepTarget(parts.model, parts.train_step, policy, batch)


def dataset_probe(
    name: str,
    ds: tf.data.Dataset,
    d: DoctorConfig,
    batch_size: int | None = None,
    time_limit: float | None = None,
) -> Probe:
    """The pipeline alone; with `batch_size` its elements are single examples, batched here
    so that each pull is one batch as in training. `time_limit`: seconds per repeat."""
    if batch_size:
        ds = _batch_any(ds, batch_size)
    # Under a time limit the batches are pulled in quarters, so that the limit can bite.
    chunk = d.steps if time_limit is None else max(1, d.steps // 4)
    return pipeline_probe(
        name,
        ds,
        batches=d.steps,
        warmup=d.warmup,
        min_seconds=d.min_seconds,
        chunk=chunk,
        time_limit=time_limit,
    )


def _batch_any(ds: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Batched as training would be; examples of varying shape (a parse before padded_batch
    or bucket_by_sequence_length) cannot stack, so they batch as ragged tensors."""
    import tensorflow as tf

    specs = tf.nest.flatten(ds.element_spec)
    if all(isinstance(s, tf.TensorSpec) for s in specs) and not all(
        s.shape.is_fully_defined() for s in specs
    ):
        return ds.ragged_batch(batch_size)
    return ds.batch(batch_size)


def train_probe(
    name: str,
    target: StepTarget,
    ds: tf.data.Dataset,
    d: DoctorConfig,
    time_limit: float | None = None,
    steps_per_call: int | None = None,
    give_up: bool = False,
    runner: StepRunner | None = None,
) -> Probe:
    """The real train step fed by `ds`: examples/s and the time it waited for input
    (`time_limit`: seconds per repeat; `steps_per_call`: steps per compiled call, default
    doctor.steps; `give_up`: a what-if whose one step exceeds the limit raises TooSlow;
    `runner`: the steps to time, by default the target's own)."""
    return training_probe(
        name,
        runner or target.run_steps,
        ds,
        steps=steps_per_call or d.steps,
        warmup=d.warmup,
        examples_per_step=target.batch,
        min_seconds=d.min_seconds,
        time_limit=time_limit,
        give_up=give_up,
    )


def compute_probe(
    name: str,
    target: StepTarget,
    ds: tf.data.Dataset,
    d: DoctorConfig,
    time_limit: float | None = None,
    steps_per_call: int | None = None,
    give_up: bool = False,
) -> Probe:
    """The compute limit: the same train step fed the first batch of `ds` from memory (by
    the target's own cached runner where it has one)."""
    batch = cached_batch(ds)
    return train_probe(
        name, target, batch, d, time_limit, steps_per_call, give_up, runner=target.run_cached
    )


def fixed_steps_per_call(cfg: RunConfig) -> int | None:
    """The steps per compiled call the run trains with when the run file fixes it
    (train.steps_per_loop: N); None for auto, which sizes calls for speed."""
    spl = cfg.train.steps_per_loop
    return spl if isinstance(spl, int) else None


def steps_per_call_in_use(cfg: RunConfig) -> int | None:
    """The steps per call the user's training makes: model.fit's steps_per_execution for a
    handed model (doctor.fit_steps_per_execution), else the run file's fixed one."""
    return cfg.doctor.fit_steps_per_execution or fixed_steps_per_call(cfg)
