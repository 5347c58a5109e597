"""`tfperf doctor`: is training waiting for its input, which stage is slow, what to change
(and with --fix, which changes measurably help). This module parses options and prints;
the work is in tfperf/doctor/."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

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
from tfperf.cli.report import leave_for_report
from tfperf.errors import UserError
from tfperf.util.format import number
from tfperf.util.progress import progress_bar

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
--fix times each candidate change against the current pipeline in paired, interleaved
repeats, keeps those that are faster beyond the noise, checks the result against the
original the same way, and writes RUNFILE.optimized.yaml: the run file with only the
changed keys (comments kept). For a data.pipeline function it also writes
RUNFILE.optimized.py, whose make_dataset calls that function and applies the kept rewrites
(tfperf.apply_rewrites); the .yaml points data.pipeline at it, so `tfperf train
RUNFILE.optimized.yaml` trains on the fixed pipeline. When nothing is kept, nothing is
written. Compute changes that keep the results (train.jit_compile, train.steps_per_loop,
strategy: mirrored) are tried like pipeline changes; precision and a larger batch change
the results, so they are tried only with --allow precision,batch.

\b
Bounded: a shuffle buffer or cache larger than the RAM budget is named from the graph and
timed capped, never filled; --budget SECONDS (default 90, 300 with --fix) is split over
the probes; Ctrl-C prints what was measured so far and exits 130.

\b
Leaves its result (the --json dict) in the run folder, {train.out_dir}/doctor.json, for
`tfperf report`; --html FILE also writes that report (one self-contained HTML file).

\b
--json prints {"diagnosis": {...}, "fix": {...} or null}: verdict, input_bound_fraction,
pipeline / compute_limit / training (examples_per_s, ...), stages, slowest_stage,
findings (code, title, stage, evidence, change, expected, expected_speedup, kind); with
--fix and no trial, "fix_skipped" says why.
"""


def register(app: typer.Typer) -> None:
    @command(app, "doctor", HELP, "Find and fix input bottlenecks, measured.")
    def doctor(
        runfile: RunFileArg = None,
        set_: SetOpt = None,
        json_out: JsonOpt = False,
        fix: Annotated[
            bool,
            typer.Option(
                "--fix",
                help="Try each candidate change, keep those that measurably "
                "help, write RUNFILE.optimized.yaml (and .py for a data.pipeline function).",
            ),
        ] = False,
        probe_steps: Annotated[
            int | None,
            typer.Option(
                "--probe-steps",
                "--max-steps",
                min=1,
                help="At most this many measured steps (batches) per probe and repeat "
                "(doctor.steps otherwise). --max-steps is an older name of --probe-steps.",
            ),
        ] = None,
        repeats: Annotated[
            int | None,
            typer.Option(
                "--repeats",
                min=1,
                help="Timed repeats per variant, interleaved; the median is kept "
                "(doctor.repeats otherwise).",
            ),
        ] = None,
        out: Annotated[
            str | None,
            typer.Option(
                "--out",
                help="Where --fix writes the optimized run file "
                "(default: next to RUNFILE, or ./doctor.optimized.yaml).",
            ),
        ] = None,
        budget_s: Annotated[
            float | None,
            typer.Option(
                "--budget",
                min=1,
                help="Seconds the doctor may take, split over its probes (default 90, with "
                "--fix 300); what was not measured in time is reported as such.",
            ),
        ] = None,
        target: Annotated[
            float | None,
            typer.Option(
                "--target",
                metavar="EXAMPLES_PER_S",
                min=1,
                help="The rate the accelerator will consume (from a GPU run or a spec sheet): "
                "the pipeline alone is judged against it, and --fix keeps what raises the "
                "pipeline's own rate (doctor.target otherwise).",
            ),
        ] = None,
        allow: Annotated[
            str | None,
            typer.Option(
                "--allow",
                metavar="precision,batch",
                help="Changes --fix may apply although they change the results: precision "
                "(another dtype policy), batch (4x pipeline.batch_size; the learning rate must "
                "follow). Without it they are only advised (doctor.allow otherwise).",
            ),
        ] = None,
        html_out: Annotated[
            str | None,
            typer.Option(
                "--html",
                metavar="FILE",
                help="Also write the HTML report of the run folder (this diagnosis, its "
                "trials and the training logs there) to FILE, as `tfperf report` does.",
            ),
        ] = None,
    ) -> None:
        cfg = load_run(runfile, set_)
        if probe_steps is not None:
            cfg.doctor.steps = min(cfg.doctor.steps, probe_steps)
            cfg.doctor.warmup = min(cfg.doctor.warmup, probe_steps)
        if repeats is not None:
            cfg.doctor.repeats = repeats
        if allow is not None:
            cfg.doctor.allow = parse_allow(allow)
        if target is not None:
            cfg.doctor.target = target
        # The doctor pulls in TensorFlow: imported here so that `tfperf --help` stays fast.
        from tfperf.doctor.diagnosis.diagnose import diagnose
        from tfperf.doctor.fix.entry import fix_pipeline
        from tfperf.doctor.fix.runfile import default_output
        from tfperf.doctor.probes.budget import (
            DOCTOR_SECONDS,
            FIX_SECONDS,
            Budget,
            progress_text,
        )
        from tfperf.doctor.report.render import render_diagnosis, render_fix

        if cfg.workload and not cfg.data.pipeline:
            from tfperf.inputs.datasets import ensure_workload_data

            ensure_workload_data(cfg, progress=not json_out)  # a built-in workload's data
        spinner = progress_bar(
            "measuring", unit="measurements", enabled=not json_out, transient=True, console=console
        )
        total = budget_s or (FIX_SECONDS if fix else DOCTOR_SECONDS)
        with spinner as bar:

            def show(label: str, left: float) -> None:
                bar.update(description=progress_text(label), info=f"{left:,.0f} s left")

            # Start-up counts (Python, TensorFlow, the run file): the budget is the wall time.
            budget = Budget(max(1.0, total - startup_seconds()), on_probe=show)
            try:
                with ctrl_c_noted():
                    # The diagnosis takes at most DOCTOR_SECONDS of a --fix budget.
                    part = min(DOCTOR_SECONDS, total / 3) if fix else total
                    tick = lambda _: bar.advance(1)  # noqa: E731
                    diag = diagnose(cfg, tick=tick, budget=budget.part(part))
                    result = None
                    # A repeat that outlasted the whole budget left no time for a trial:
                    # the diagnosis says which rate is not measured.
                    if fix and not budget.abandoned:
                        written = Path(out) if out else default_output(runfile, cfg)
                        tick = lambda _: bar.advance(1)  # noqa: E731
                        result = fix_pipeline(cfg, diag, out=written, tick=tick, budget=budget)
            except KeyboardInterrupt:
                interrupted(budget, json_out)
        fixed = result.to_dict() if result else None
        data: dict[str, Any] = {"diagnosis": diag.to_dict(), "fix": fixed}
        skipped = fix_skipped(budget.abandoned, total) if fix and result is None else None
        if skipped:
            data["fix_skipped"] = skipped  # why "fix" is null: scripts read it too
        leave_for_report(cfg, data, html_out)  # {train.out_dir}/doctor.json, and --html
        if json_out:
            print_json(data)
            return
        stdout = stdout_console()
        render_diagnosis(diag, stdout)
        if result is not None:
            render_fix(result, stdout)
        elif skipped:
            stdout.print(f"--fix: {skipped}", markup=False)


def fix_skipped(abandoned: dict[str, str], seconds: float) -> str:
    """Why --fix tried nothing: the probes the diagnosis abandoned at the budget's end."""
    which = "; ".join(f"{name}: {why}" for name, why in abandoned.items()) or "none"
    return (
        f"no trial: a repeat outlasted the time budget of {seconds:,.0f} s ({which}); run "
        "again with a larger --budget"
    )


def startup_seconds() -> float:
    """The seconds this process took before the budget started, when it is the tfperf
    command itself (run in another program's process, a test's: 0)."""
    from tfperf.doctor.probes.budget import process_seconds

    argv0 = Path(sys.argv[0])
    own = argv0.name == "tfperf" or argv0.parts[-3:] == ("tfperf", "cli", "main.py")
    return process_seconds() if own else 0.0


ALLOWABLE = ("precision", "batch")


def parse_allow(text: str) -> list[Any]:
    """'precision,batch' -> ["precision", "batch"]; anything else is a clear error."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in ALLOWABLE]
    if wrong:
        raise UserError(
            f"--allow: expected a comma-separated list of {', '.join(ALLOWABLE)}, found "
            f"{', '.join(repr(n) for n in wrong)}"
        )
    return names


@contextlib.contextmanager
def ctrl_c_noted() -> Iterator[None]:
    """Ctrl-C (SIGINT) also sets the doctor's INTERRUPTED flag: a KeyboardInterrupt raised
    while TensorFlow runs Python on the main thread can come back as an op error, which a
    probe reports as not measured, and the doctor then ran to its end and exited 0. A doctor
    started with SIGINT ignored (a script's background job: Python then keeps it ignored)
    stops on it too."""
    from tfperf.doctor.probes.budget import INTERRUPTED

    def on_sigint(signum: int, frame: Any) -> None:
        INTERRUPTED.set()
        signal.default_int_handler(signum, frame)

    INTERRUPTED.clear()
    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread (a library caller's thread): nothing to note
        yield
        return
    try:
        yield
        if INTERRUPTED.is_set():  # swallowed on the way: the work ran on to its end
            raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, previous)
        INTERRUPTED.clear()  # a later diagnosis in this process starts afresh


def interrupted(budget: Any, json_out: bool) -> None:
    """Ctrl-C: prints what was measured so far (examples/s per probe) and exits 130."""
    so_far = budget.so_far()
    if json_out:
        print_json({"interrupted": True, "measured_so_far": so_far})
    else:
        out = stdout_console()
        out.print("interrupted: measured so far (median examples/s over the repeats done)")
        for name, m in so_far.items():
            out.print(f"  {name}: {number(m['examples_per_s'])} ex/s ({m['repeats']} repeats)")
        if not so_far:
            out.print("  nothing yet")
    raise typer.Exit(130)
