"""The cost of `tfperf.keras.InputMonitor` in a user's `model.fit`: the same model, the same
tf.data pipeline (in-memory arrays, shuffled, batched, prefetched, as a tutorial writes it),
fit with and without `monitor(ds)` + the callback (TensorBoard scalars every 50 steps), run
interleaved (tfperf.measure.side_by_side) and compared pair by pair. Two models: the
regression workload's (Dense 1024 on 1024 features, a step of a few ms on this CPU: the
per-batch cost shows most) and a wider one. The target: the monitored fit within 2%.

    python benchmarks/bench_fit_monitor.py [--quick]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

from common import announce, machine, paired, parse_args, spread, table

from tfperf.measure import Probe, Run, side_by_side

BATCH = 128  # the regression workload's batch


def arrays_dataset() -> Any:
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8192, 1024), dtype=np.float32)
    y = x[:, :8].sum(axis=1, keepdims=True)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192).repeat()
    return ds.batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def fit_probe(steps: int, monitored: bool, width: int, spe: int) -> Callable[[], Run]:
    """Builds the model and dataset once (with or without the monitor) and warms them up;
    returns one timed model.fit call of `steps` steps, to be called many times: short fits,
    interleaved pair by pair, keep this shared host's slow spells (a whole fit on one core)
    out of the ratios."""
    import keras

    import tfperf.keras
    from tfperf.workloads import get_workload

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    model = get_workload("regression").build_model()
    if width:
        model = keras.Sequential(
            [
                keras.Input(model.input_shape[1:]),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
    model.compile(keras.optimizers.Adam(1e-3), "mse", steps_per_execution=spe, jit_compile=False)
    ds = arrays_dataset()
    callbacks = []
    if monitored:
        mon = tfperf.keras.InputMonitor(log_dir=tempfile.mkdtemp(), verbose=0)
        ds, callbacks = mon.monitor(ds), [mon]
    model.fit(ds, epochs=1, steps_per_epoch=4 * spe, verbose=0, callbacks=callbacks)  # warm up

    def run() -> Run:
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
        return Run(time.perf_counter() - t0, steps, steps * BATCH, time.process_time() - c0)

    return run


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (48 if args.quick else 200)
    repeats = args.repeats or (3 if args.quick else 15)
    cases = [("regression model, steps_per_execution=1", 0, 1)]
    cases += [("regression model, steps_per_execution=8", 0, 8)]
    cases += [("Dense 2048 x2, steps_per_execution=1", 2048, 1)]
    rows = []
    for label, width, spe in cases:
        n = max(spe, steps // 4 if width else steps)  # a wide model's step is ~4x longer
        probes = [
            Probe("plain", fit_probe(n, False, width, spe)),
            Probe("monitored", fit_probe(n, True, width, spe)),
        ]
        res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
        from tfperf.measure import compare

        c = compare(res["plain"], res["monitored"])
        # CPU time per example, pair by pair: this shared host sometimes gives a process one
        # core for a whole fit (its wall time then doubles), which CPU time does not see.
        cpu = sorted(
            m.cpu_seconds / p.cpu_seconds
            for p, m in zip(res["plain"].runs, res["monitored"].runs, strict=True)
            if p.cpu_seconds > 0
        )
        cpu_cell = f"{cpu[len(cpu) // 2]:.2f}x [{cpu[0]:.2f}-{cpu[-1]:.2f}]" if cpu else "-"
        rows.append(
            [
                label,
                spread(res["plain"].examples_per_s),
                spread(res["monitored"].examples_per_s),
                paired(c),
                cpu_cell,
            ]
        )
    print("## model.fit with tfperf.keras.InputMonitor: its overhead\n")
    print(
        f"{machine()}. In-memory arrays (8,192 x 1,024 float32) shuffled, batched by {BATCH}, "
        "prefetched; float32; "
        f"{steps} timed steps per fit ({steps // 4} for the wide model), each variant's model "
        f"and dataset built once and warmed up, then {repeats} fits of each, interleaved; "
        "median [min-max]; 'monitored / plain' is the median [min-max] of the per-run pairs "
        "(1.00x: no cost; the target is >= 0.98x); 'CPU monitored / plain' is the process CPU "
        "time of the two fits, pair by pair (the same steps: 1.00x is no cost).\n"
    )
    headers = ["model", "plain fit ex/s", "monitored fit ex/s", "monitored / plain"]
    print(table([*headers, "CPU monitored / plain"], rows))


if __name__ == "__main__":
    main()
