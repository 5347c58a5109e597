"""The cost of `tfperf.keras.InputMonitor` in a user's `model.fit`: the same model, the same
tf.data pipeline, fit with and without `monitor(ds)` + the callback (TensorBoard scalars
every 50 steps), run interleaved (tfperf.measure.side_by_side) and compared pair by pair.
Two models: the regression workload's (Dense 1024, a step of a few ms on this CPU: the
per-batch cost shows most) and a wider one. The target: the monitored fit within 2%.

    python benchmarks/bench_fit_monitor.py [--quick]
"""

from __future__ import annotations

import tempfile
import time

from common import announce, machine, paired, parse_args, regression_cfg, spread, table

from tfperf.measure import Probe, Run, side_by_side

BATCH = 128  # the batch of common.regression_cfg


def fit_run(steps: int, monitored: bool, width: int, spe: int) -> Run:
    """A whole model.fit call of `steps` steps after a warm-up fit, with or without the
    monitor; the dataset and model are built the same way for both."""
    import keras

    import tfperf.keras
    from tfperf.inputs.datasets import make_input_dataset
    from tfperf.workloads import get_workload

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    cfg = regression_cfg("bench_monitor_", steps, "float32")
    wl = get_workload("regression")
    model = wl.build_model()
    if width:
        model = keras.Sequential(
            [
                keras.Input(model.input_shape[1:]),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
    model.compile(keras.optimizers.Adam(1e-3), wl.loss, steps_per_execution=spe, jit_compile=False)
    ds = make_input_dataset(cfg, training=True)
    callbacks = []
    if monitored:
        mon = tfperf.keras.InputMonitor(log_dir=tempfile.mkdtemp(), verbose=0)
        ds, callbacks = mon.monitor(ds), [mon]
    model.fit(ds, epochs=1, steps_per_epoch=2 * spe, verbose=0, callbacks=callbacks)  # warm up
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
    return Run(time.perf_counter() - t0, steps, steps * BATCH, time.process_time() - c0)


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (200 if args.quick else 1000)
    repeats = args.repeats or (2 if args.quick else 5)
    from tfperf.inputs.datasets import ensure_workload_data

    ensure_workload_data(regression_cfg("bench_monitor_", steps, "float32"), progress=False)
    cases = [("regression model, steps_per_execution=1", 0, 1)]
    cases += [("regression model, steps_per_execution=8", 0, 8)]
    cases += [("Dense 2048 x2, steps_per_execution=1", 2048, 1)]
    rows = []
    for label, width, spe in cases:
        probes = [
            Probe("plain", lambda w=width, s=spe: fit_run(steps, False, w, s)),
            Probe("monitored", lambda w=width, s=spe: fit_run(steps, True, w, s)),
        ]
        res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
        from tfperf.measure import compare

        c = compare(res["plain"], res["monitored"])
        rows.append(
            [
                label,
                spread(res["plain"].examples_per_s),
                spread(res["monitored"].examples_per_s),
                paired(c),
            ]
        )
    print("## model.fit with tfperf.keras.InputMonitor: its overhead\n")
    print(
        f"{machine()}. Regression workload's tuned tf.data pipeline, batch {BATCH}, float32; "
        f"{steps} timed steps per fit after a warm-up fit; median [min-max] of {repeats} "
        "interleaved runs; 'monitored / plain' is the median [min-max] of the per-run pairs "
        "(1.00x: no cost; the target is >= 0.98x).\n"
    )
    print(table(["model", "plain fit ex/s", "monitored fit ex/s", "monitored / plain"], rows))


if __name__ == "__main__":
    main()
