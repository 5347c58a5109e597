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
from tfperf.util.format import compact, number, plural

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
    pipeline over the original's and over the reader alone (the "read" prefix: records
    read and batched, nothing parsed; not a bound: the full pipeline overlaps its stages
    and may beat it); null when not measured.

--service ADDRESS (grpc://HOST:PORT of `tfperf data-service`) runs the full pipeline on
that tf.data service (pipeline.service.address; mode parallel_epochs unless the run file
sets one) while the stage prefixes run here, and adds to the JSON
  service: {address, mode, workers, client_examples_per_s (measured here),
    per_worker_examples_per_s (the client rate over the registered workers: the rate one
    worker gives when the workers, not this process, are the limit), local_examples_per_s
    (the last stage prefix before the final prefetch, in this process: the pipeline
    without the service)}; null without the service.

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
    for col in ("pipeline", "examples/s", "min-max", "MB/s", "CPU us/ex", "vs read"):
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


def _service_sets(runfile: Any, sets: list[str] | None, address: str | None) -> list[str]:
    """--set items for --service: the address, and parallel_epochs unless a mode is set."""
    if address is None:
        return list(sets or [])
    sets = [*(sets or []), f"pipeline.service.address={address}"]
    if load_run(runfile, sets).pipeline.service.mode == "off":
        sets.append("pipeline.service.mode=parallel_epochs")
    return sets


def _print_service(out: Any, svc: dict[str, Any]) -> None:
    local = svc["local_examples_per_s"]
    here = f"; this process alone {number(local)} ex/s" if local else ""
    out.print(
        f"through the tf.data service at {svc['address']} ({svc['mode']}, "
        f"{plural(svc['workers'], 'worker')}): "
        f"{number(svc['client_examples_per_s'])} ex/s received here, "
        f"~{number(svc['per_worker_examples_per_s'])} ex/s per worker{here}",
        highlight=False,
        markup=False,
    )


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
        service: Annotated[
            str | None,
            typer.Option(
                "--service",
                help="A tf.data service dispatcher (grpc://HOST:PORT): the full pipeline runs "
                "there; adds the client-side and per-worker rates.",
                metavar="ADDRESS",
            ),
        ] = None,
    ) -> None:
        cfg = load_run(runfile, _service_sets(runfile, set_, service))
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
            # The reader alone is a reference, not a bound: the full pipeline runs its
            # stages side by side (parallel maps, prefetch) and may beat it.
            out.print(
                f"tuned runs at {report.tuned_over_read:.0%} of the rate of the reader alone "
                "(the read prefix)"
            )
        if report.tuned_over_original is not None:
            out.print(f"tuned / original = {report.tuned_over_original:.1f}x")
        if report.service is not None:
            _print_service(out, report.service)
