"""tfperf's loop against Keras' model.fit on the same model and the same tf.data pipeline
(regression workload, float32, one device): fit with its default one step per call and
with steps_per_execution equal to tfperf's steps per call. tfperf must not be slower (it
adds input-wait timing, tf.data model snapshots and hooks). Prints one markdown section.

    python benchmarks/bench_train_vs_fit.py [--quick]
"""

from __future__ import annotations

import statistics
import tempfile
import time

from common import DATA_ROOT, machine, parse_args, rate, table


def _cfg(steps: int, out: str):
    from tfperf.config import load_config

    return load_config(None, ["workload=regression", f"data.dir={DATA_ROOT / 'regression'}",
                              "data.examples=20000", "data.eval_examples=100",
                              "pipeline.batch_size=128", "model.learning_rate=0.01",
                              f"train.out_dir={out}", f"train.max_steps={steps}",
                              "train.precision=float32", "train.monitor_system=false",
                              "train.checkpoint.every_steps=1000000"])  # fmt: skip


def keras_fit(steps: int, steps_per_execution: int) -> float:
    import keras

    from tfperf.inputs.datasets import make_input_dataset
    from tfperf.workloads import get_workload

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    cfg = _cfg(steps, tempfile.mkdtemp())
    wl = get_workload("regression")
    model = wl.build_model()
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=wl.loss,
                  steps_per_execution=steps_per_execution, jit_compile=False)  # fmt: skip
    ds = make_input_dataset(cfg, training=True)
    warm = 2 * steps_per_execution
    model.fit(ds, epochs=1, steps_per_epoch=warm, verbose=0)  # trace and warm up
    t0 = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
    return steps * 128 / (time.perf_counter() - t0)


def tfperf_loop(steps: int) -> tuple[float, int]:
    from tfperf.inputs.datasets import ensure_workload_data
    from tfperf.train.loop import train

    cfg = _cfg(steps, tempfile.mkdtemp(prefix="bench_fit_"))
    ensure_workload_data(cfg, progress=False)
    result = train(cfg, progress=False)
    return result.examples_per_sec, result.steps_per_loop


def main() -> None:
    args = parse_args(__doc__)
    steps = args.batches or (300 if args.quick else 1500)
    repeats = args.repeats or (1 if args.quick else 3)
    ours, fit1, fitn, spl = [], [], [], 1
    for _ in range(repeats):  # interleaved
        r, spl = tfperf_loop(steps)
        ours.append(r)
        fit1.append(keras_fit(steps, 1))
        fitn.append(keras_fit(steps, spl))
    med = statistics.median
    rows = [
        ["tfperf train (auto steps per call)", rate(med(ours)), "1.00x"],
        ["model.fit, steps_per_execution=1 (default)", rate(med(fit1)),
         f"{med(ours) / med(fit1):.2f}x"],
        [f"model.fit, steps_per_execution={spl}", rate(med(fitn)),
         f"{med(ours) / med(fitn):.2f}x"],
    ]  # fmt: skip
    print("## Training: tfperf's loop vs model.fit\n")
    print(f"{machine()}. Regression workload, float32, batch 128, the same tuned tf.data "
          f"pipeline for both; {steps} timed steps per run after a warm-up, median of "
          f"{repeats} interleaved runs.\n")  # fmt: skip
    print(table(["variant", "examples/s", "tfperf / this"], rows))
    worst = med(ours) / max(med(fit1), med(fitn))
    print(
        f"\ntfperf vs the faster fit: {worst:.2f}x "
        f"({'not slower' if worst >= 0.97 else 'slower'}; within 3% counts as equal)."
    )


if __name__ == "__main__":
    main()
