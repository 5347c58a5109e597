"""tfperf's loop against Keras' model.fit on the same model and the same tf.data pipeline
(regression workload, float32, one device): fit with its default one step per call and
with steps_per_execution equal to tfperf's steps per call. tfperf must not be slower (it
adds input-wait timing, tf.data model snapshots and hooks). The three run interleaved
(tfperf.measure.side_by_side) and are compared run by run (compare). Prints one markdown
section.

    python benchmarks/bench_train_vs_fit.py [--quick]
"""

from __future__ import annotations

import time

from common import announce, machine, paired, parse_args, regression_cfg, run_at, spread, table

from tfperf.measure import Probe, Run, compare, side_by_side

BATCH = 128  # the batch of common.regression_cfg


FIT_XLA = [False]  # fit's resolved jit_compile, from its last run
OUR_XLA = [""]  # tfperf's train.jit_compile choice and reason, from its last run


def keras_fit(steps: int, steps_per_execution: int) -> Run:
    """A whole model.fit call of `steps` steps, after a warm-up fit (fit's own loop and
    callbacks count, as they do for its users)."""
    import keras

    from tfperf.inputs.datasets import make_input_dataset
    from tfperf.workloads import get_workload

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    cfg = regression_cfg("bench_fit_", steps, "float32")
    wl = get_workload("regression")
    model = wl.build_model()
    optimizer = keras.optimizers.Adam(1e-2)
    model.compile(
        optimizer=optimizer,
        loss=wl.loss,
        steps_per_execution=steps_per_execution,
        jit_compile="auto",  # Keras' default, as tfperf's train.jit_compile: auto
    )
    FIT_XLA[0] = bool(model.jit_compile)  # what auto resolved to on this host
    ds = make_input_dataset(cfg, training=True)
    warm = 2 * steps_per_execution
    model.fit(ds, epochs=1, steps_per_epoch=warm, verbose=0)  # trace and warm up
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
    return Run(time.perf_counter() - t0, steps, steps * BATCH, time.process_time() - c0)


def tfperf_loop(steps: int) -> tuple[Run, int]:
    """A whole `tfperf train` run (its examples/s leaves out the compiling call) and the
    steps per call it chose."""
    from tfperf.inputs.datasets import ensure_workload_data
    from tfperf.train.loop import train

    cfg = regression_cfg("bench_fit_", steps, "float32")
    ensure_workload_data(cfg, progress=False)
    result = train(cfg, progress=False)
    OUR_XLA[0] = f"{'on' if result.jit_compile else 'off'} ({result.jit_compile_reason})"
    return run_at(result.examples_per_sec, steps, BATCH), result.steps_per_loop


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (300 if args.quick else 1500)
    repeats = args.repeats or (1 if args.quick else 3)
    spl = [1]  # tfperf's steps per call, from its run just before fit's in each round

    def ours() -> Run:
        run, spl[0] = tfperf_loop(steps)
        return run

    probes = [
        Probe("ours", ours),
        Probe("fit1", lambda: keras_fit(steps, 1)),
        Probe("fitn", lambda: keras_fit(steps, spl[0])),
    ]
    res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
    vs = {k: compare(res[k], res["ours"]) for k in ("fit1", "fitn")}
    rows = [
        ["tfperf train (auto steps per call)", spread(res["ours"].examples_per_s), "1.00x"],
        [
            "model.fit, steps_per_execution=1 (default)",
            spread(res["fit1"].examples_per_s),
            paired(vs["fit1"]),
        ],
        [
            f"model.fit, steps_per_execution={spl[0]}",
            spread(res["fitn"].examples_per_s),
            paired(vs["fitn"]),
        ],
    ]
    print("## Training: tfperf's loop vs model.fit\n")
    print(
        f"{machine()}. Regression workload, float32, batch {BATCH}, the same tuned tf.data "
        f"pipeline for both; {steps} timed steps per run after a warm-up, median [min-max] "
        f"of {repeats} interleaved runs; 'tfperf / this' is the median [min-max] of the "
        "per-run pairs. XLA, each side with its own `auto`: tfperf train "
        f"{OUR_XLA[0]}; model.fit compile(jit_compile='auto') resolved to "
        f"{'on' if FIT_XLA[0] else 'off'}.\n"
    )
    print(table(["variant", "examples/s", "tfperf / this"], rows))
    # Against the faster fit; compare() calls it slower only when every pair is and the
    # median is more than 3% below.
    faster = max(vs, key=lambda k: res[k].examples_per_s.median)
    worst = vs[faster]
    print(
        f"\ntfperf vs the faster fit: {paired(worst)} "
        f"({'slower' if worst.verdict == 'slower' else 'not slower'}; within 3% counts as "
        "equal)."
    )


if __name__ == "__main__":
    main()
