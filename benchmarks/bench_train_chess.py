"""The chess workload trained end to end by `tfperf train` (the tuned pipeline feeding
the model) against its compute limit: the same model and train function fed one batch
cached in memory. Also with `pipeline.cache_preprocessed: true`, measured after the first
epoch has filled the cache. Prints one markdown section for BENCHMARKS.md.

End-to-end rates are wall-clock between loop calls (the loop's own work between calls
counts), over the same window of steps for every variant; CPU time is the process's (all
threads) per example over that window. Each window is a tfperf.measure `Run`; the variants
run interleaved (side_by_side) and their ratios to the limit are paired (compare).

    python benchmarks/bench_train_chess.py [--quick] [--data DIR]
"""

from __future__ import annotations

from common import (
    DATA_ROOT,
    announce,
    machine,
    paired,
    parse_args,
    run_at,
    spread,
    table,
    train_clock,
    train_section,
    window,
)

from tfperf.measure import Measurement, Probe, Run, compare, side_by_side

TARGET = 0.90
BATCH = 512


def _cfg(data_dir: str, steps: int, precision: str, cache: bool = False):
    from tfperf.config import config_from_dict

    return config_from_dict(
        {
            "workload": "chess",
            "data": {"dir": data_dir},
            "pipeline": {"batch_size": BATCH, "cache_preprocessed": cache},
            "train": train_section("bench_chess_", steps, precision),
        }
    )


def main() -> None:
    args = parse_args(__doc__)
    from tfperf.data.pipeline_sizes import steps_per_epoch
    from tfperf.inputs.datasets import ensure_workload_data, open_source
    from tfperf.train.compute_limit import compute_limit
    from tfperf.train.loop import train

    steps = args.batches or (150 if args.quick else 1000)
    repeats = args.repeats or (1 if args.quick else 7)
    data_dir = args.data or str(DATA_ROOT / "chess" / "data")
    cfg0 = _cfg(data_dir, steps, "float32")
    ensure_workload_data(cfg0, progress=True)
    epoch = steps_per_epoch(open_source(cfg0).records("train"), BATCH)
    skip = epoch + 5  # every variant is timed after the first epoch (the cache's fill)
    first = train(_cfg(data_dir, 20, "auto"), progress=False)  # lets `auto` pick, once
    precision = first.precision
    fill = Measurement("fill")  # the cached run's first epoch, beside each limit
    last = []  # the last end-to-end run's TrainResult

    def limit() -> Run:
        lim = compute_limit(_cfg(data_dir, steps, precision), steps=steps, precision=precision)
        return run_at(lim.examples_per_sec, steps, BATCH, lim.cpu_us_per_example)

    def end_to_end(cache: bool) -> Run:
        clock = train_clock()
        cfg = _cfg(data_dir, skip + steps, precision, cache)
        result = train(cfg, hooks=[clock], progress=False)
        if cache:
            fill.runs.append(window(clock.marks, BATCH, 0, epoch))
        else:
            last[:] = [result]
        return window(clock.marks, BATCH, skip)

    probes = [
        Probe("limit", limit),
        Probe("e2e", lambda: end_to_end(False)),
        Probe("cache", lambda: end_to_end(True)),
    ]

    res = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
    lim = res["limit"]

    def row(label: str, m: Measurement, bound: bool = True, cpu: bool = True) -> list[str]:
        of = paired(compare(lim, m), pct=True)
        cpu_us = f"{m.cpu_us_per_example.median:.1f}" if cpu else "-"
        frac = f"{m.input_bound_fraction:.1%}" if bound else "-"
        return [label, spread(m.examples_per_s), of, cpu_us, frac]

    table_rows = [
        row("compute limit (one cached batch)", lim, bound=False),
        row("tfperf train end to end (tuned pipeline)", res["e2e"]),
        row("same, pipeline.cache_preprocessed: true (RAM), after epoch 1", res["cache"]),
        row("same, epoch 1 (filling the cache)", fill, bound=False, cpu=False),
    ]
    e2e, cached = compare(lim, res["e2e"]).ratio, compare(lim, res["cache"]).ratio
    cpu_limit = lim.cpu_us_per_example.median
    cpu_e2e = res["e2e"].cpu_us_per_example.median
    cpu_cache = res["cache"].cpu_us_per_example.median
    measured = first.precision_detail.split("(measured: ")[-1].rstrip(")")
    print("## Training: chess end to end vs its compute limit\n")
    print(
        f"{machine()}. Chess workload (batch {BATCH}, {epoch} steps per epoch), precision "
        f"{precision} (chosen by `auto`: {measured}); {steps} timed steps per run, after the "
        f"first epoch ({skip} steps) for the end-to-end runs; median [min-max] of {repeats} "
        "interleaved runs; 'of limit' is the median [min-max] of each run's ratio to the "
        "limit measured beside it. End-to-end rates are wall-clock between loop calls; CPU "
        "us/example is the process's CPU time (all threads); input-bound fraction = time the "
        "steps waited for input / wall time, over all runs.\n"
    )
    headers = ["variant", "examples/s", "of limit (paired)", "CPU us/example"]
    print(table([*headers, "input-bound fraction"], table_rows))
    verdict = "meets" if e2e >= TARGET else "misses"
    verdict_cached = "meets" if cached >= TARGET else "misses"
    r = last[0]
    print(
        f"\nThe tuned pipeline end to end reaches {e2e:.0%} of the compute limit ({verdict} "
        f"the {TARGET:.0%} target); with its preprocessed batches cached in RAM {cached:.0%} "
        f"({verdict_cached} it). CPU time per example (the process's, all threads): the model "
        f"alone {cpu_limit:.1f} us, end to end {cpu_e2e:.1f}, cached {cpu_cache:.1f}; on a "
        "CPU-only machine the input runs on the model's cores. Last end-to-end run: input "
        f"wait {r.wait_ms_mean:.2f} ms/step, prefetch buffer {r.buffered_mean or 0:.1f} "
        f"batches on average, {r.steps_per_loop} steps per call."
    )


if __name__ == "__main__":
    main()
