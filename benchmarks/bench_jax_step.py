"""tf.data feeding JAX. (1) A Flax-style JAX training step (examples/jax_step.py: a jitted MLP
step on numpy batches) fed by its original pipeline (a per-example augmentation) and by the
pipeline `tfperf.optimize(ds, step=...)` returned, timed as the user's loop runs it
(`as_numpy_iterator`, one step per batch, each result waited for), interleaved pair by
pair. (2) The cost of `tfperf.keras.InputMonitor` in a Keras 3 `fit` on the JAX backend:
the same model and pipeline fit with and without `monitor(ds)` + the callback, interleaved;
the target is within 2% at the median.

    python benchmarks/bench_jax_step.py [--quick]
"""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "jax"  # before keras is imported anywhere: fixed at import

import runpy  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import announce, machine, paired, parse_args, say, spread, table  # noqa: E402

from tfperf.measure import Probe, Run, compare, side_by_side  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_step.py"
BATCH = 128  # the regression workload's batch, for the fit part


def loop_probe(ds: Any, make_step: Callable[[], Any], batches: int) -> Callable[[], Run]:
    """The user's loop over `ds` (repeated), warmed up once; each call times `batches`
    steps on a fresh iterator after one untimed batch (the step already compiled)."""
    step = make_step()
    ds = ds.repeat()
    first = next(ds.as_numpy_iterator())
    step(first).block_until_ready()  # compiles

    def run() -> Run:
        it = ds.as_numpy_iterator()
        step(next(it)).block_until_ready()
        examples = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(batches):
            batch = next(it)
            step(batch).block_until_ready()
            examples += len(batch[1])
        return Run(time.perf_counter() - t0, batches, examples, time.process_time() - c0)

    return run


def fit_probe(steps: int, monitored: bool) -> Callable[[], Run]:
    """One Keras-on-JAX model and dataset (with or without the monitor), warmed up; each
    call times one fit of `steps` steps (short fits, interleaved pair by pair)."""
    import keras
    import numpy as np
    import tensorflow as tf

    import tfperf.keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8192, 1024), dtype=np.float32)
    y = x[:, :8].sum(axis=1, keepdims=True)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192).repeat()
    ds = ds.batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    model = keras.Sequential(
        [keras.Input((1024,)), keras.layers.Dense(1024, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    callbacks = []
    if monitored:
        mon = tfperf.keras.InputMonitor(log_dir=tempfile.mkdtemp(), verbose=0)
        ds, callbacks = mon.monitor(ds), [mon]
    model.fit(ds, epochs=1, steps_per_epoch=8, verbose=0, callbacks=callbacks)  # compiles

    def run() -> Run:
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
        return Run(time.perf_counter() - t0, steps, steps * BATCH, time.process_time() - c0)

    return run


def main() -> None:
    args = parse_args(__doc__)
    import keras

    import tfperf

    assert keras.backend.backend() == "jax", keras.backend.backend()
    repeats = args.repeats or (3 if args.quick else 11)
    batches = args.batches or (20 if args.quick else 60)
    ex = runpy.run_path(str(EXAMPLE), run_name="bench")
    ds = ex["make_dataset"]()
    say("optimize: the pipeline for the JAX step (budget 120 s)")
    fast, report = tfperf.optimize(ds, step=ex["Trainer"](), budget_s=60 if args.quick else 120)
    say(str(report))
    probes = [
        Probe("original", loop_probe(ds, ex["Trainer"], batches)),
        Probe("optimized", loop_probe(fast, ex["Trainer"], batches)),
    ]
    res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
    c = compare(res["original"], res["optimized"])
    loop_row = [
        "JAX MLP step (examples/jax_step.py)",
        spread(res["original"].examples_per_s),
        spread(res["optimized"].examples_per_s),
        paired(c),
        ", ".join(report.kept) or "nothing",
    ]

    steps = args.batches or (40 if args.quick else 150)
    fits = [Probe("plain", fit_probe(steps, False)), Probe("monitored", fit_probe(steps, True))]
    res = side_by_side(fits, repeats=repeats, on_run=announce(repeats))
    m = compare(res["plain"], res["monitored"])
    fit_row = [
        "Dense 1024 on 1024 features, batch 128",
        spread(res["plain"].examples_per_s),
        spread(res["monitored"].examples_per_s),
        paired(m),
    ]

    print("## tf.data feeding JAX (bench_jax_step.py)\n")
    print(
        f"{machine()}. JAX {__import__('jax').__version__} on the CPU, Keras "
        f"{keras.__version__} on the JAX backend. Each variant built and warmed up once, then "
        f"{repeats} timed runs of each, interleaved; median [min-max]; the ratio is the median "
        "[min-max] of the per-run pairs.\n"
    )
    print(
        f"**A JAX step fed by the original and the optimized pipeline.** `tfperf.optimize(ds, "
        f"step=Trainer())` (budget {60 if args.quick else 120} s) on examples/jax_step.py's "
        f"pipeline (8,192 examples, a per-example map of ~20 ops, batch 128); then the user's "
        f"loop (`as_numpy_iterator`, one jitted step per batch, each waited for), {batches} "
        "batches per run.\n"
    )
    print(
        table(
            ["step", "original ex/s", "optimized ex/s", "optimized / original", "kept"],
            [loop_row],
        )
    )
    print(
        f"\n**InputMonitor in a Keras-on-JAX fit.** In-memory arrays shuffled, batched, "
        f"prefetched; {steps} steps per fit; the target is monitored / plain >= 0.98x.\n"
    )
    print(table(["model", "plain fit ex/s", "monitored fit ex/s", "monitored / plain"], [fit_row]))


if __name__ == "__main__":
    main()
