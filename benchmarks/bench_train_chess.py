"""Seed E's chess workload trained end to end by `tfperf train` (the tuned pipeline feeding
the model) against its compute limit: the same model and train function fed one batch
cached in memory. The end-to-end run should reach >= 90% of the limit. Prints one
markdown section for BENCHMARKS.md.

    python benchmarks/bench_train_chess.py [--quick] [--data DIR]
"""

from __future__ import annotations

import statistics
import tempfile

from common import DATA_ROOT, machine, parse_args, rate, table

TARGET = 0.90


def _cfg(data_dir: str, steps: int, precision: str, cache: bool = False):
    from tfperf.config import config_from_dict

    return config_from_dict({
        "workload": "chess",
        "data": {"dir": data_dir},
        "pipeline": {"batch_size": 512, "cache_preprocessed": cache},
        "train": {"out_dir": tempfile.mkdtemp(prefix="bench_chess_"), "max_steps": steps,
                  "precision": precision, "monitor_system": False,
                  "checkpoint": {"every_steps": 1_000_000}},
    })  # fmt: skip


def main() -> None:
    args = parse_args(__doc__)
    from tfperf.data.inputs import ensure_workload_data
    from tfperf.train.loop import measure_compute_limit, train

    steps = args.batches or (150 if args.quick else 600)
    repeats = args.repeats or (1 if args.quick else 3)
    data_dir = args.data or str(DATA_ROOT / "chess" / "data")
    ensure_workload_data(_cfg(data_dir, steps, "float32"), progress=True)
    first = train(_cfg(data_dir, 20, "auto"), progress=False)  # lets `auto` pick, once
    precision = first.precision
    e2e, limit, results, cached = [], [], [], []
    for _ in range(repeats):  # interleaved
        limit.append(measure_compute_limit(_cfg(data_dir, steps, precision), steps=steps,
                                           precision=precision))  # fmt: skip
        r = train(_cfg(data_dir, steps, precision), progress=False)
        results.append(r)
        e2e.append(r.examples_per_sec)
        # Preprocessed batches cached in RAM: later epochs skip parsing and unpacking.
        rc = train(_cfg(data_dir, steps, precision, cache=True), progress=False)
        cached.append(rc.examples_per_sec)
    med = statistics.median
    frac = med(e2e) / med(limit)
    last = results[-1]
    rows = [
        ["compute limit (one cached batch)", rate(med(limit)), "100%"],
        ["tfperf train end to end (tuned pipeline)", rate(med(e2e)), f"{frac:.0%}"],
        ["same, pipeline.cache_preprocessed: true (RAM)", rate(med(cached)),
         f"{med(cached) / med(limit):.0%}"],
    ]  # fmt: skip
    print("## Training: chess end to end vs its compute limit\n")
    print(f"{machine()}. Chess workload (batch 512), precision {precision} (chosen by "
          f"`auto`: {first.precision_detail.split('(measured: ')[-1].rstrip(')')}); {steps} "
          f"steps per run, median of {repeats} interleaved runs.\n")  # fmt: skip
    print(table(["variant", "examples/s", "of limit"], rows))
    print(f"\nEnd to end reaches {frac:.0%} of the compute limit "
          f"({'meets' if frac >= TARGET else 'misses'} the {TARGET:.0%} target); "
          f"input wait {last.wait_ms_mean:.2f} ms/step, input-bound fraction "
          f"{last.input_bound_fraction:.1%}, prefetch buffer "
          f"{last.buffered_mean or 0:.1f} batches on average, {last.steps_per_loop} steps "
          "per call. On a CPU-only machine the pipeline's parsing and bit unpacking run on "
          "the same cores as the model: a low input wait with end to end below the limit "
          "means the input costs CPU time, not waiting.")  # fmt: skip


if __name__ == "__main__":
    main()
