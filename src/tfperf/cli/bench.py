"""`tfperf bench`: the input pipeline alone, its stage prefixes and, on request, the
workload's original pipeline side by side; a table for people, JSON for scripts. The
measuring lives in tfperf/bench.py; this module only parses options and prints."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

# tfperf.bench imports TensorFlow only inside its functions: --help stays fast.
from tfperf.bench import DEFAULT_BATCHES, DEFAULT_REPEATS, DEFAULT_WARMUP, bench_pipeline
from tfperf.cli.common import (
    JsonOpt,
    RunFileArg,
    SetOpt,
    command,
    console,
    load_run,
    print_json,
    stdout_console,
)
from tfperf.data.manifest import manifest_path
from tfperf.inputs.datasets import data_dir
from tfperf.util.format import compact, number

HELP = """Measure the training input pipeline alone (no model): examples/s, batches/s and
MB/s (serialized records read) of the full tuned pipeline and of each stage prefix
(read, +shuffle, +batch, +parse, +preprocess, +prefetch), medians of repeated runs,
warm-up excluded.

--compare original also measures the workload's original pipeline, interleaved with the
tuned one (A B A B ...), and prints tuned/original. A built-in workload's missing data is
generated first.

--json prints (format "tfperf.bench/1"):
  format, tf_version, cpus, run_file, workload, split, batch_size, repeats, batches, warmup;
  tuned: the full tuned pipeline (a measurement);
  original: the original pipeline (a measurement), or null without --compare;
  stages: measurements of each stage prefix in pipeline order; the last is the full
    pipeline; [] with --no-stages;
  ratios: {tuned_over_original, tuned_over_read}: median examples/s of the tuned
    pipeline over the original's and over the read-only bound (the "read" prefix: records
    read and batched, nothing parsed); null when not measured.

A measurement: name, variant (tuned/original), stage (make_dataset stop_after or null),
examples_per_s, batches_per_s, mb_per_s, cpu_us_per_example (each {median, min, max};
MB = 10^6 bytes, mb_per_s null when the record size is unknown; CPU time of the whole
process, all threads), record_bytes, and runs (one {seconds, batches, examples,
cpu_seconds} per repeat).
"""


def _heading(report: Any) -> str:
    # A line of its own, not the table's title: a title wraps at the table's width.
    what = report.workload or report.run_file or "pipeline"
    return (
        f"tfperf bench: {what} ({report.split}, batch {report.batch_size}, "
        f"{report.batches} batches x {report.repeats} runs)"
    )


def _table(report: Any) -> Any:
    t = Table()
    for col in ("pipeline", "examples/s", "min-max", "MB/s", "CPU us/ex", "of read"):
        t.add_column(col, justify="left" if col == "pipeline" else "right")
    read = next((m for m in report.stages if m.stage == "read"), None)
    rows = list(report.stages) or [report.tuned]
    if report.original is not None:
        rows.append(report.original)
    for m in rows:
        ex = m.examples_per_s
        mb = m.mb_per_s
        frac = f"{ex.median / read.examples_per_s.median:.0%}" if read else ""
        name = "+prefetch = tuned" if m is report.tuned and report.stages else m.name
        t.add_row(
            name,
            number(ex.median, small_digits=2),
            f"{compact(ex.min)}-{compact(ex.max)}",
            number(mb.median, small_digits=2) if mb else "?",
            f"{m.cpu_us_per_example.median:.2f}",
            frac,
        )
    return t


def register(app: typer.Typer) -> None:
    @command(
        app, "bench", HELP, "Measure the input pipeline alone, stage by stage, beside the original."
    )
    def bench(
        runfile: RunFileArg = None,
        set_: SetOpt = None,
        json_out: JsonOpt = False,
        repeats: Annotated[
            int, typer.Option("--repeats", help="Timed runs per pipeline (median/min/max).")
        ] = DEFAULT_REPEATS,
        batches: Annotated[
            int,
            typer.Option(
                "--batches",
                help="Timed batches per run (the debug limit: lower is faster, noisier).",
            ),
        ] = DEFAULT_BATCHES,
        warmup: Annotated[
            int,
            typer.Option(
                "--warmup",
                help="Batches pulled before timing each run (buffers fill, autotuning settles).",
            ),
        ] = DEFAULT_WARMUP,
        compare: Annotated[
            str | None,
            typer.Option(
                "--compare",
                help="'original': also measure the workload's original "
                "pipeline and print tuned/original.",
                metavar="original",
            ),
        ] = None,
        stages: Annotated[
            bool,
            typer.Option(
                "--stages/--no-stages",
                help="Measure every stage prefix (read, "
                "+shuffle, ...) too, to find the slow stage.",
            ),
        ] = True,
        split: Annotated[
            str | None, typer.Option("--split", help="Split to read; default data.train_split.")
        ] = None,
    ) -> None:
        cfg = load_run(runfile, set_)
        if cfg.workload and not cfg.data.pipeline and not manifest_path(data_dir(cfg)).exists():
            console.print(
                f"no data at {data_dir(cfg)}: generating {cfg.data.examples} "
                f"{cfg.workload} examples first (data.examples)"
            )
        report = bench_pipeline(
            cfg,
            repeats=repeats,
            batches=batches,
            warmup=warmup,
            stages=stages,
            compare=compare,
            split=split,
            progress=True,
        )
        if json_out:
            print_json(report.to_dict())
            return
        out = stdout_console()
        out.print(_heading(report), highlight=False, markup=False)
        out.print(_table(report))
        if report.tuned_over_read is not None:
            out.print(f"tuned reaches {report.tuned_over_read:.0%} of the read-only bound")
        if report.tuned_over_original is not None:
            out.print(f"tuned / original = {report.tuned_over_original:.1f}x")
