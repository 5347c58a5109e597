"""The compute limit: what the run file's model and train function can do when input costs
~nothing (one batch cached in memory, one device), timed through tfperf.measure. A run is
"near the limit" when its end-to-end examples/s is close to this rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfperf.config import RunConfig
from tfperf.measure import cached_batch, measure_one, training_probe
from tfperf.train.parts import build_train_parts, pick_precision, run_call
from tfperf.train.run_input import dataset_fn, element_spec
from tfperf.train.strategy import StrategyInfo


@dataclass(frozen=True)
class ComputeLimit:
    """What the model alone can do: examples/s fed one cached batch, and the process's CPU
    time (all threads) per example meanwhile."""

    examples_per_sec: float
    cpu_us_per_example: float
    precision: str
    steps: int


def compute_limit(
    cfg: RunConfig, *, steps: int = 200, precision: str | None = None, steps_per_loop: int = 50
) -> ComputeLimit:
    """`steps` train steps, in calls of `steps_per_loop`, of the run file's model fed its
    first batch from memory, after untimed warm-up calls; `precision` (default: the run
    file's, measured for auto).

    The CPU time per example shows what the input adds on a machine whose cores it shares.
    """
    # TensorFlow is imported on first use so that `tfperf --help` stays fast.
    import keras
    import tensorflow as tf

    previous = keras.config.dtype_policy()
    try:
        info = StrategyInfo(tf.distribute.get_strategy(), "one_device", 1)
        batch = cfg.pipeline.batch_size
        policy = precision or (cfg.train.precision if cfg.train.precision != "auto" else None)
        spec = element_spec(cfg)
        if policy is None:
            policy = pick_precision(cfg, info, spec, None).policy
        parts = build_train_parts(cfg, info, policy, spec, None)

        def run_steps(iterator: Any, n: int) -> float:
            """n steps in calls of steps_per_loop; the seconds they waited for input."""
            wait, done = 0.0, 0
            while done < n:
                k = min(steps_per_loop, n - done)
                wait += run_call(info, parts.train_step, iterator, k)["wait_s"]
                done += k
            return wait

        # The cache holds the first batch; the pipeline behind it stops once it is read,
        # so the limit never shares the CPU with input threads.
        cached = cached_batch(dataset_fn(cfg)(tf.distribute.InputContext()))
        probe = training_probe(
            "compute limit",
            run_steps,
            cached,
            steps=steps,
            warmup=steps_per_loop,
            examples_per_step=batch,
        )
        m = measure_one(probe, repeats=1)
        return ComputeLimit(
            m.examples_per_s.median, m.cpu_us_per_example.median, policy, m.runs[0].batches
        )
    finally:
        keras.config.set_dtype_policy(previous)


def measure_compute_limit(
    cfg: RunConfig, *, steps: int = 200, precision: str | None = None, steps_per_loop: int = 50
) -> float:
    """The compute limit in examples/s (see `compute_limit`)."""
    limit = compute_limit(cfg, steps=steps, precision=precision, steps_per_loop=steps_per_loop)
    return limit.examples_per_sec
