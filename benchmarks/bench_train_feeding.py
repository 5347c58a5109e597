"""Feeding on this machine: the same model (Dense(1024, relu) -> logit, Adam(1e-2), batch
128 x 1024 features) fed numpy batches from Python every step (feed_dict's way) against
`tfperf train` (shards read in the graph, prefetched, many steps per compiled call), in
float32 and with `precision: auto`, interleaved (tfperf.measure.side_by_side) and compared
run by run (compare). Prints one markdown section for BENCHMARKS.md.

    python benchmarks/bench_train_feeding.py [--quick]
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from common import announce, machine, paired, parse_args, regression_cfg, run_at, spread, table

from tfperf.measure import Probe, Run, compare, side_by_side

# The TF1 tutorial's queue-over-feed_dict speed-up; tfperf should at least match it.
TARGET = 1.57
BATCH = 128  # the batch of common.regression_cfg


def numpy_feeding(steps: int, batch: int = BATCH, features: int = 1024) -> Run:
    """A numpy batch made in Python and handed to a one-step tf.function, `steps` times."""
    import keras
    import tensorflow as tf

    from tfperf.workloads import get_workload

    keras.config.set_dtype_policy("float32")
    wl = get_workload("regression")
    model = wl.build_model()
    opt = keras.optimizers.Adam(1e-2)
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    rng = np.random.default_rng(0)

    def feed():
        x = rng.standard_normal((batch, features), dtype=np.float32)
        y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
        return step(x, y)

    for _ in range(10):  # trace and warm up
        feed()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = feed()
    float(loss)  # wait for the last step
    return Run(time.perf_counter() - t0, steps, steps * batch, time.process_time() - c0)


def tfperf_train(steps: int, precision: str) -> Any:
    """A whole `tfperf train` run; its result's examples/s leaves out the compiling call."""
    from tfperf.inputs.datasets import ensure_workload_data
    from tfperf.train.loop import train

    cfg = regression_cfg("bench_feed_", steps, precision)
    ensure_workload_data(cfg, progress=False)
    return train(cfg, progress=False)


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (300 if args.quick else 1500)
    repeats = args.repeats or (1 if args.quick else 3)
    last_auto: list[Any] = []  # the last `precision: auto` run's TrainResult

    def train_run(precision: str) -> Run:
        result = tfperf_train(steps, precision)
        if precision == "auto":
            last_auto[:] = [result]
        return run_at(result.examples_per_sec, steps, BATCH)

    probes = [
        Probe("feed", lambda: numpy_feeding(steps)),
        Probe("f32", lambda: train_run("float32")),
        Probe("auto", lambda: train_run("auto")),
    ]
    res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
    auto = last_auto[0]
    vs_f32, vs_auto = compare(res["feed"], res["f32"]), compare(res["feed"], res["auto"])
    rows = [
        [
            "numpy batches fed from Python each step (feed_dict's way)",
            spread(res["feed"].examples_per_s),
            "1.00x",
        ],
        ["tfperf train, float32", spread(res["f32"].examples_per_s), paired(vs_f32)],
        [
            f"tfperf train, precision auto -> {auto.precision}",
            spread(res["auto"].examples_per_s),
            paired(vs_auto),
        ],
    ]
    print("## Training: numpy feeding vs tfperf train\n")
    print(
        f"{machine()}. Regression workload (batch {BATCH} x 1024 float features, "
        f"Dense(1024, relu) -> logit, Adam(1e-2)); {steps} timed steps per run, median "
        f"[min-max] of {repeats} interleaved runs, ratios paired run by run; tfperf's "
        "compiling first call is not timed.\n"
    )
    print(table(["variant", "examples/s", "vs feeding (paired)"], rows))
    best = max(vs_f32.ratio, vs_auto.ratio)
    verdict = "meets" if best >= TARGET else "misses"
    print(
        f"\ntfperf {verdict} the TF1 tutorial's queue-over-feed_dict {TARGET}x (best "
        f"{best:.2f}x). precision auto measured: "
        f"{auto.precision_detail.split('(measured: ')[-1]}\ninput-bound fraction in tfperf "
        f"(auto): {auto.input_bound_fraction:.1%}, steps per call: {auto.steps_per_loop}."
    )


if __name__ == "__main__":
    main()
