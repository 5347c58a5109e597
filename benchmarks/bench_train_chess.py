"""Seed E's chess workload trained end to end by `tfperf train` (the tuned pipeline feeding
the model) against its compute limit: the same model and train function fed one batch
cached in memory. Also with `pipeline.cache_preprocessed: true`, measured after the first
epoch has filled the cache. Prints one markdown section for BENCHMARKS.md.

End-to-end rates are wall-clock between loop calls (the loop's own work between calls
counts), over the same window of steps for every variant; CPU time is the process's (all
threads) per example over that window.

    python benchmarks/bench_train_chess.py [--quick] [--data DIR]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from common import DATA_ROOT, machine, parse_args, rate, table

TARGET = 0.90
BATCH = 512


def _cfg(data_dir: str, steps: int, precision: str, cache: bool = False):
    from tfperf.config import config_from_dict

    return config_from_dict({
        "workload": "chess",
        "data": {"dir": data_dir},
        "pipeline": {"batch_size": BATCH, "cache_preprocessed": cache},
        "train": {"out_dir": tempfile.mkdtemp(prefix="bench_chess_"), "max_steps": steps,
                  "precision": precision, "monitor_system": False,
                  "checkpoint": {"every_steps": 1_000_000}},
    })  # fmt: skip


def _clock():
    """A hook that notes (step, wall, CPU, input wait so far) after every loop call."""
    from tfperf.hooks import Hook

    class Clock(Hook):
        def __init__(self) -> None:
            self.marks: list[tuple[int, float, float, float]] = []
            self.wait = 0.0

        def on_loop_end(self, run, step, logs) -> None:  # noqa: ANN001
            self.wait += logs["input/wait_ms"] * logs["steps"] / 1e3
            self.marks.append((step, time.perf_counter(), time.process_time(), self.wait))

    return Clock()


def window(marks: list[tuple[int, float, float, float]], start: int, end: int | None = None):
    """(examples/s, CPU us/example, input-bound fraction) between the first mark at or after
    step `start` (never the compiling first call) and the last mark at or before `end`."""
    first = next(i for i, m in enumerate(marks) if m[0] >= start and i >= 1)
    last = max(i for i, m in enumerate(marks) if end is None or m[0] <= end)
    first = min(first, last - 1)  # a short run (--batches): at least one call's window
    (s0, t0, c0, w0), (s1, t1, c1, w1) = marks[first], marks[last]
    examples = (s1 - s0) * BATCH
    return examples / (t1 - t0), 1e6 * (c1 - c0) / examples, (w1 - w0) / (t1 - t0)


def main() -> None:
    args = parse_args(__doc__)
    from tfperf.data.pipeline import steps_per_epoch
    from tfperf.inputs.datasets import ensure_workload_data, open_source
    from tfperf.train.loop import compute_limit, train

    steps = args.batches or (150 if args.quick else 1000)
    repeats = args.repeats or (1 if args.quick else 7)
    data_dir = args.data or str(DATA_ROOT / "chess" / "data")
    cfg0 = _cfg(data_dir, steps, "float32")
    ensure_workload_data(cfg0, progress=True)
    epoch = steps_per_epoch(open_source(cfg0).records("train"), BATCH)
    skip = epoch + 5  # every variant is timed after the first epoch (the cache's fill)
    first = train(_cfg(data_dir, 20, "auto"), progress=False)  # lets `auto` pick, once
    precision = first.precision
    rows: dict[str, list[tuple[float, float, float]]] = {"limit": [], "e2e": [], "cache": []}
    fill: list[float] = []
    last = None
    for i in range(repeats):  # interleaved
        lim = compute_limit(_cfg(data_dir, steps, precision), steps=steps, precision=precision)
        rows["limit"].append((lim.examples_per_sec, lim.cpu_us_per_example, 0.0))
        for key, cache in (("e2e", False), ("cache", True)):
            clock = _clock()
            r = train(_cfg(data_dir, skip + steps, precision, cache), hooks=[clock],
                      progress=False)  # fmt: skip
            rows[key].append(window(clock.marks, skip))
            if cache:
                fill.append(window(clock.marks, 0, epoch)[0])
            else:
                last = r
        done = ", ".join(f"{k} {rate(v[-1][0])}" for k, v in rows.items())
        print(f"repeat {i + 1}/{repeats}: {done}", file=sys.stderr)
    med = statistics.median

    def paired(key: str) -> list[float]:
        """Per-repeat ratios to the limit measured beside it (steadier than ratios of
        medians when other jobs load the machine unevenly)."""
        return [x[0] / lim[0] for x, lim in zip(rows[key], rows["limit"], strict=True)]

    def row(label: str, key: str, bound: bool = True) -> list[str]:
        xs, ratios = rows[key], paired(key)
        span = (
            f"{rate(med(x[0] for x in xs))} [{rate(min(x[0] for x in xs))}-"
            f"{rate(max(x[0] for x in xs))}]"
        )
        of = f"{med(ratios):.0%} [{min(ratios):.0%}-{max(ratios):.0%}]"
        frac = f"{med(x[2] for x in xs):.1%}" if bound else "-"
        return [label, span, of, f"{med(x[1] for x in xs):.1f}", frac]

    fills = [f / lim[0] for f, lim in zip(fill, rows["limit"], strict=True)]
    table_rows = [
        row("compute limit (one cached batch)", "limit", bound=False),
        row("tfperf train end to end (tuned pipeline)", "e2e"),
        row("same, pipeline.cache_preprocessed: true (RAM), after epoch 1", "cache"),
        ["same, epoch 1 (filling the cache)", rate(med(fill)), f"{med(fills):.0%}", "-", "-"],
    ]  # fmt: skip
    e2e, cached = med(paired("e2e")), med(paired("cache"))
    cpu_limit = med(x[1] for x in rows["limit"])
    cpu_e2e = med(x[1] for x in rows["e2e"])
    cpu_cache = med(x[1] for x in rows["cache"])
    print("## Training: chess end to end vs its compute limit\n")
    print(f"{machine()}. Chess workload (batch {BATCH}, {epoch} steps per epoch), precision "
          f"{precision} (chosen by `auto`: "
          f"{first.precision_detail.split('(measured: ')[-1].rstrip(')')}); {steps} timed "
          f"steps per run, after the first epoch ({skip} steps) for the end-to-end runs; "
          f"median [min-max] of {repeats} interleaved runs; 'of limit' is the median [min-max] "
          "of each run's ratio to the limit measured beside it. End-to-end rates are wall-clock "
          "between loop calls; CPU us/example is the process's CPU time (all threads); "
          "input-bound fraction = time the steps waited for input / wall time.\n")  # fmt: skip
    print(table(["variant", "examples/s", "of limit (paired)", "CPU us/example",
                 "input-bound fraction"], table_rows))  # fmt: skip
    verdict = "meets" if e2e >= TARGET else "misses"
    print(f"\nThe tuned pipeline end to end reaches {e2e:.0%} of the compute limit ({verdict} "
          f"the {TARGET:.0%} target); with its preprocessed batches cached in RAM {cached:.0%} "
          f"({'meets' if cached >= TARGET else 'misses'} it). CPU time per example (the process's, "
          f"all threads): the model alone {cpu_limit:.1f} us, end to end {cpu_e2e:.1f}, cached "
          f"{cpu_cache:.1f}; on a CPU-only machine the input runs on the model's cores. Last "
          f"end-to-end run: "
          f"input wait {last.wait_ms_mean:.2f} ms/step, prefetch buffer "
          f"{last.buffered_mean or 0:.1f} batches on average, {last.steps_per_loop} steps "
          "per call.")  # fmt: skip


if __name__ == "__main__":
    main()
