"""`tfperf doctor`: is training waiting for its input, which stage is slow, what to change
(and with --fix, which changes measurably help). This module parses options and prints;
the work is in tfperf/doctor/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tfperf.cli.common import (
    JsonOpt,
    RunFileArg,
    SetOpt,
    console,
    load_run,
    print_json,
    user_errors,
)

HELP = """Diagnose input bottlenecks of a training run, measured side by side in one process:
(a) the input pipeline alone and each stage prefix, (b) the model fed one cached batch (the
compute limit), (c) both together with the real train step. Prints the input-bound fraction
(input wait / wall time in (c)) with a verdict (>= 20% highly, >= 5% moderately, else not
input-bound), the slowest stage, and findings from a static lint of the dataset's graph,
each with its evidence, the change and the gain it expects. A run that is not input-bound
gets no input advice.

\b
Works on tfperf pipelines (a workload or data.dir) and on any 'module:function' returning a
tf.data.Dataset (data.pipeline), with any Keras 3 model (model.name).

\b
--fix applies each candidate change, re-measures, keeps those that help, and writes
RUNFILE.optimized.yaml (tfperf pipelines) or RUNFILE.optimized.md (other datasets: the
rewritten pipeline and options) with a before/after table.

\b
--json prints {"diagnosis": {...}, "fix": {...} or null}: verdict, input_bound_fraction,
pipeline / compute_limit / training (examples_per_s, ...), stages, slowest_stage,
findings (code, title, stage, evidence, change, expected, expected_speedup, kind).
"""


def register(app: typer.Typer) -> None:
    @app.command("doctor", help=HELP, short_help="Find and fix input bottlenecks, measured.")
    @user_errors
    def doctor(
        runfile: RunFileArg = None,
        set_: SetOpt = None,
        json_out: JsonOpt = False,
        fix: Annotated[
            bool,
            typer.Option(
                "--fix",
                help="Try each candidate change, keep those that measurably "
                "help, write RUNFILE.optimized.yaml (or .md for other datasets).",
            ),
        ] = False,  # fmt: skip
        max_steps: Annotated[
            int | None,
            typer.Option(
                "--max-steps",
                help="Debug limit: at most this many measured steps "
                "(batches) per variant and repeat (doctor.steps otherwise).",
            ),
        ] = None,  # fmt: skip
        repeats: Annotated[
            int | None,
            typer.Option(
                "--repeats",
                help="Timed repeats per variant; the median is kept (doctor.repeats otherwise).",
            ),
        ] = None,  # fmt: skip
        out: Annotated[
            str | None,
            typer.Option(
                "--out",
                help="Where --fix writes the optimized run file "
                "(default: next to RUNFILE, or ./doctor.optimized.yaml).",
            ),
        ] = None,  # fmt: skip
    ) -> None:
        cfg = load_run(runfile, set_)
        if max_steps is not None:
            cfg.doctor.steps = min(cfg.doctor.steps, max_steps)
            cfg.doctor.warmup = min(cfg.doctor.warmup, max_steps)
        if repeats is not None:
            cfg.doctor.repeats = repeats
        from tfperf.doctor.fixes import default_output, fix_pipeline
        from tfperf.doctor.report import render_diagnosis, render_fix
        from tfperf.doctor.rules import diagnose

        if cfg.workload and not cfg.data.pipeline:
            from tfperf.inputs.datasets import ensure_workload_data

            ensure_workload_data(cfg, progress=not json_out)  # a built-in workload's data
        with _progress(json_out) as tick:
            diag = diagnose(cfg, tick=tick)
            result = None
            if fix:
                target = Path(out) if out else default_output(runfile, cfg)
                result = fix_pipeline(cfg, diag, out=target, tick=tick)
        if json_out:
            print_json({"diagnosis": diag.to_dict(),
                        "fix": result.to_dict() if result else None})  # fmt: skip
            return
        from rich.console import Console

        stdout = Console(width=max(120, console.width))
        render_diagnosis(diag, stdout)
        if result is not None:
            render_fix(result, stdout)


class _progress:
    """A rich spinner counting measurements (on stderr; silent with --json)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.progress = None

    def __enter__(self):  # noqa: ANN204 - returns the tick callable
        if self.quiet:
            return lambda label: None
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                 TextColumn("{task.completed} measurements"),
                                 TimeElapsedColumn(), console=console, transient=True)  # fmt: skip
        self.progress.start()
        task = self.progress.add_task("measuring", total=None)

        def tick(label: str) -> None:
            self.progress.update(task, advance=1, description=f"measuring {label}")

        return tick

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
