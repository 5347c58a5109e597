"""The doctor's measurements, side by side in one process: a pipeline alone and each of its
stage prefixes, the model fed one cached batch (the compute limit), and both together with
the real train step (input wait measured in the graph, as the training loop does).

Only timing lives here; lint.py reads the graph, rules.py turns the numbers into findings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfperf.errors import UserError

Tick = Callable[[str], None]


def _no_tick(label: str) -> None:
    pass


@dataclass
class Rate:
    """Throughput of one measured variant (median over repeats)."""

    examples_per_s: float
    batches_per_s: float
    examples_per_batch: float
    seconds: float  # measured wall time, all repeats

    def to_dict(self) -> dict[str, float]:
        return {"examples_per_s": round(self.examples_per_s, 1),
                "batches_per_s": round(self.batches_per_s, 2),
                "examples_per_batch": self.examples_per_batch,
                "seconds": round(self.seconds, 4)}  # fmt: skip


@dataclass
class TrainingRate:
    """The train step fed by the pipeline: throughput and the share of time spent waiting."""

    rate: Rate
    wait_s: float
    wall_s: float

    @property
    def input_bound_fraction(self) -> float:
        return self.wait_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.rate.to_dict(), "wait_s": round(self.wait_s, 4),
                "wall_s": round(self.wall_s, 4),
                "input_bound_fraction": round(self.input_bound_fraction, 4)}  # fmt: skip


def leading_dim(element: Any) -> int:
    """Examples in one element: the first tensor's leading dimension (1 for scalars)."""
    import tensorflow as tf

    flat = tf.nest.flatten(element)
    if not flat:
        return 1
    shape = flat[0].shape
    return int(shape[0]) if shape.rank else 1


def element_bytes(element: Any) -> int:
    """Bytes held by one element (strings by their length)."""
    import numpy as np
    import tensorflow as tf

    total = 0
    for t in tf.nest.flatten(element):
        value = np.asarray(t.numpy() if hasattr(t, "numpy") else t)
        if value.dtype == object:
            total += sum(len(v) for v in np.ravel(value)) + 8 * value.size
        else:
            total += value.nbytes
    return total


def _median_rate(runs: list[tuple[float, int, int]]) -> Rate:
    # Median of repeats: one noisy neighbour on a shared machine does not decide.
    eps = [ex / s for s, ex, _ in runs if s > 0]
    bps = [b / s for s, _, b in runs if s > 0]
    per_batch = sum(ex for _, ex, _ in runs) / max(1, sum(b for _, _, b in runs))
    return Rate(
        examples_per_s=statistics.median(eps) if eps else 0.0,
        batches_per_s=statistics.median(bps) if bps else 0.0,
        examples_per_batch=per_batch,
        seconds=sum(s for s, _, _ in runs),
    )


def _consumer() -> Any:
    """A compiled loop pulling `n` elements from an iterator inside the graph (as the
    train step does), returning how many examples they held; no Python per element."""
    import tensorflow as tf

    @tf.function
    def consume(it: Any, n: Any) -> Any:
        count = tf.constant(0, tf.int64)
        for _ in tf.range(n):
            first = tf.nest.flatten(next(it))[0]
            rows = tf.shape(first, out_type=tf.int64)[0] if first.shape.rank else 1
            count += tf.cast(rows, tf.int64)
        return count

    return consume


def measure_dataset(
    ds: Any,
    *,
    steps: int,
    warmup: int,
    repeats: int,
    batch_size: int | None = None,
    min_seconds: float = 0.0,
    tick: Tick = _no_tick,
    label: str = "pipeline",
) -> Rate:
    """Examples/s of pulling batches from `ds` inside a compiled loop. With `batch_size` the
    elements are single examples, batched here so that each pull is one batch as in training.
    A finite dataset is repeated (restarting is part of an epoch's cost)."""
    import tensorflow as tf

    if batch_size:
        ds = ds.batch(batch_size)
    if int(tf.data.experimental.cardinality(ds)) != tf.data.INFINITE_CARDINALITY:
        ds = ds.repeat()
    consume = _consumer()
    it = iter(ds)
    try:
        consume(it, tf.constant(max(1, warmup)))  # traces; buffers fill; not measured
        runs = []
        for _ in range(repeats):
            examples = batches = 0
            t0 = now = time.perf_counter()
            while batches < steps or now - t0 < min_seconds:
                examples += int(consume(it, tf.constant(steps)))
                batches += steps
                now = time.perf_counter()
            runs.append((now - t0, examples, batches))
            tick(label)
    except tf.errors.OutOfRangeError:
        raise UserError(f"{label}: the dataset is empty") from None
    del it
    return _median_rate(runs)


def sample_elements(ds: Any, n: int = 4) -> list[Any]:
    """The first `n` elements (or fewer), for sizes and dtypes."""
    return list(ds.take(n))


def measure_cardinality(ds: Any) -> int | None:
    """Elements per pass, when tf.data knows it without reading (None: unknown/infinite)."""
    import tensorflow as tf

    n = int(tf.data.experimental.cardinality(ds))
    return n if n >= 0 else None


# ---- the train step --------------------------------------------------------------------
@dataclass
class StepTarget:
    """A model, optimizer and the real compiled multi-step train function, built once."""

    model: Any
    train_step: Any  # tfperf.train.step.TrainStep
    precision: str
    batch: int


def build_target(cfg: Any, element_spec: Any, batch: int, precision: str | None = None) -> Any:
    """The run file's model and loss behind tfperf's TrainStep, under `precision`."""
    import keras
    import tensorflow as tf

    from tfperf.train.loop import build_train_parts
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
        parts = build_train_parts(cfg, info, policy, element_spec, None, batch, metrics=False)
    finally:
        keras.config.set_dtype_policy(before)
    return StepTarget(parts.model, parts.train_step, policy, batch)


def _run_steps(target: StepTarget, it: Any, steps: int) -> tuple[float, float]:
    """(wall seconds, input-wait seconds) of `steps` train steps in one compiled call."""
    t0 = time.perf_counter()
    out = target.train_step(it, steps)
    wait = float(out["wait_s"])  # reading the result waits for the call to finish
    return time.perf_counter() - t0, wait


def measure_training(
    target: StepTarget,
    ds: Any,
    *,
    steps: int,
    warmup: int,
    repeats: int,
    min_seconds: float = 0.0,
    tick: Tick = _no_tick,
    label: str = "training",
) -> TrainingRate:
    """The real train step fed by `ds` (must repeat): examples/s and input-wait share."""
    it = iter(ds)
    # Not measured: the first call traces and compiles, the second warms kernel caches.
    _run_steps(target, it, max(1, warmup))
    _run_steps(target, it, max(1, warmup))
    runs, wait_total, wall_total = [], 0.0, 0.0
    for _ in range(repeats):
        wall = wait = 0.0
        n = 0
        while n == 0 or wall < min_seconds:
            w, q = _run_steps(target, it, steps)
            wall, wait, n = wall + w, wait + q, n + steps
        runs.append((wall, n * target.batch, n))
        wait_total += wait
        wall_total += wall
        tick(label)
    del it  # stops the pipeline's background threads before the next measurement
    return TrainingRate(_median_rate(runs), wait_total, wall_total)


def measure_compute(
    target: StepTarget,
    ds: Any,
    *,
    steps: int,
    warmup: int,
    repeats: int,
    min_seconds: float = 0.0,
    tick: Tick = _no_tick,
    label: str = "compute limit",
) -> Rate:
    """The compute limit: the same train step fed the first batch of `ds` from memory
    (`take(1).cache().repeat()` keeps the element spec, so the step is not re-traced)."""
    cached = ds.take(1).cache().repeat()
    return measure_training(
        target,
        cached,
        steps=steps,
        warmup=warmup,
        repeats=repeats,
        min_seconds=min_seconds,
        tick=tick,
        label=label,
    ).rate
