"""Seed D on this machine: the same model (Dense(1024, relu) -> logit, Adam(1e-2), batch
128 x 1024 features) fed numpy batches from Python every step (feed_dict's way) against
`tfperf train` (shards read in the graph, prefetched, many steps per compiled call), in
float32 and with `precision: auto`. Prints one markdown section for BENCHMARKS.md.

    python benchmarks/bench_train_feeding.py [--quick]
"""

from __future__ import annotations

import statistics
import tempfile
import time

import numpy as np
from common import DATA_ROOT, machine, parse_args, rate, table

TARGET = 1.57  # the seed's queue-over-feed_dict speed-up; tfperf should at least match it


def numpy_feeding(steps: int, batch: int = 128, features: int = 1024) -> float:
    """examples/s: a numpy batch made in Python and handed to a one-step tf.function."""
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
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = feed()
    float(loss)  # wait for the last step
    return steps * batch / (time.perf_counter() - t0)


def tfperf_train(steps: int, precision: str) -> tuple[float, object]:
    from tfperf.config import load_config
    from tfperf.inputs.datasets import ensure_workload_data
    from tfperf.train.loop import train

    out = tempfile.mkdtemp(prefix="bench_feed_")
    cfg = load_config(None, ["workload=regression", f"data.dir={DATA_ROOT / 'regression'}",
                             "data.examples=20000", "data.eval_examples=100",
                             "pipeline.batch_size=128", "model.learning_rate=0.01",
                             f"train.out_dir={out}", f"train.max_steps={steps}",
                             f"train.precision={precision}", "train.monitor_system=false",
                             "train.checkpoint.every_steps=1000000"])  # fmt: skip
    ensure_workload_data(cfg, progress=False)
    result = train(cfg, progress=False)
    return result.examples_per_sec, result


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (300 if args.quick else 1500)
    repeats = args.repeats or (1 if args.quick else 3)
    feed, f32, auto = [], [], []
    last_auto = None
    for _ in range(repeats):  # interleaved: A B C A B C ...
        feed.append(numpy_feeding(steps))
        f32.append(tfperf_train(steps, "float32")[0])
        rate_auto, last_auto = tfperf_train(steps, "auto")
        auto.append(rate_auto)
    med = statistics.median
    rows = [
        ["numpy batches fed from Python each step (seed D's feed_dict)", rate(med(feed)), "1.00x"],
        ["tfperf train, float32", rate(med(f32)), f"{med(f32) / med(feed):.2f}x"],
        [f"tfperf train, precision auto -> {last_auto.precision}", rate(med(auto)),
         f"{med(auto) / med(feed):.2f}x"],
    ]  # fmt: skip
    print("## Training: seed D's numpy feeding vs tfperf train\n")
    print(f"{machine()}. Regression workload (batch 128 x 1024 float features, "
          f"Dense(1024, relu) -> logit, Adam(1e-2)); {steps} timed steps per run, median of "
          f"{repeats} interleaved runs; tfperf's compiling first call is not timed.\n")  # fmt: skip
    print(table(["variant", "examples/s", "vs feeding"], rows))
    best = max(med(f32), med(auto)) / med(feed)
    verdict = "meets" if best >= TARGET else "misses"
    print(f"\ntfperf {verdict} the seed's {TARGET}x (best {best:.2f}x). "
          f"precision auto measured: {last_auto.precision_detail.split('(measured: ')[-1]}"
          f"\ninput-bound fraction in tfperf (auto): {last_auto.input_bound_fraction:.1%}, "
          f"steps per call: {last_auto.steps_per_loop}.")  # fmt: skip


if __name__ == "__main__":
    main()
