"""`tfperf report RUN_DIR`: one self-contained HTML page of a run folder, and what `tfperf
doctor` leaves there for it (doctor.json, --html). This module parses options and prints;
reading the folder and drawing the page is tfperf/runreport/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tfperf.cli.common import command, console, report_stream
from tfperf.config import RunConfig
from tfperf.util.format import shell_command

HELP = """Write one HTML file that shows a run, from what tfperf left in its run folder (a run
file's train.out_dir): the doctor's verdict; examples/s of the pipeline alone, the compute
limit and training as bars on one axis; each stage prefix's rate as a waterfall with the
slowest stage marked; each finding with its evidence and expected vs measured gain; the
--fix trials (kept or not, paired ratio and range); input wait and examples/s over the
training steps (TensorBoard's logs/train); eval metrics per checkpoint (logs/eval).

\b
The file is self-contained: styles and the charts' JavaScript (plotly) are inlined, and
nothing is fetched when it is opened, so it can be mailed or opened offline.

\b
What the folder holds and which command writes it:
  summary.json   `tfperf train RUNFILE` (at the end of training)
  doctor.json    `tfperf doctor RUNFILE` (add --fix for the trials)
  logs/train     `tfperf train RUNFILE`
  logs/eval      `tfperf evaluate RUNFILE --watch --all` or `tfperf train RUNFILE --evaluator`
A part that is missing is named in the report with the command that makes it.

\b
Prints the path written on stdout; progress and what is missing go to stderr.
"""

RunDirArg = Annotated[
    str,
    typer.Argument(
        help="The run folder: a run file's train.out_dir (e.g. runs/chess/train).",
        metavar="RUN_DIR",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    @command(app, "report", HELP, "One self-contained HTML page of a run and its diagnosis.")
    def report(
        run_dir: RunDirArg,
        output: Annotated[
            str | None,
            typer.Option(
                "--output",
                "-o",
                metavar="FILE",
                help="Where to write the HTML file (default: RUN_DIR/report.html).",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        # plotly and TensorBoard's reader are imported here: `tfperf --help` stays fast.
        from tfperf.runreport.page import write_run_report

        console.print(f"reading {escape(run_dir)}", highlight=False)
        path, rec = write_run_report(run_dir, output)
        for note in rec.missing.values():
            console.print(f"[yellow]not in the report:[/] {escape(note)}", highlight=False)
        out = report_stream()
        out.write(f"{path}\n")
        out.flush()


def leave_for_report(cfg: RunConfig, data: dict[str, Any], html_out: str | None) -> None:
    """Saves a doctor's --json `data` as {train.out_dir}/doctor.json for `tfperf report`
    and, with `html_out`, writes that report there (said on stderr: stdout is the doctor's)."""
    from tfperf.doctor.report.saved import save_result
    from tfperf.runreport.page import write_doctor_report, write_run_report

    saved, error = save_result(cfg, data)
    if error is None:
        shows = escape(shell_command("tfperf", "report", saved.parent))
        console.print(f"[dim]saved {escape(str(saved))} (`{shows}` shows it)[/]")
    else:
        console.print(f"[yellow]warning: could not save {saved} ({escape(error)})[/]")
    if html_out is None:
        return
    if error is None:
        path, _ = write_run_report(saved.parent, html_out)
    else:
        path = write_doctor_report(Path(html_out), data["diagnosis"], data["fix"])
    console.print(f"wrote {path}", highlight=False)
