"""Renders what the doctor found: rich tables for people (verdict, the three measurements,
stage prefixes, findings; the before/after table of --fix) and plain dicts for --json.
It computes nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.fix.trials import FixResult
from tfperf.util.format import number


def render_diagnosis(diag: Diagnosis, console: Console) -> None:
    """The verdict, measurements, stages and findings as rich tables."""
    frac = diag.input_bound_fraction
    colour = {"highly": "red", "moderately": "yellow"}.get(diag.verdict.split()[0], "green")
    # Prose wraps at the console's width (100 columns when stdout is a file).
    console.print(f"[bold {colour}]{escape(diag.headline())}[/]", soft_wrap=False)
    console.print(
        f"[bold]{diag.source}[/] with model [bold]{diag.model}[/] (batch {diag.batch_size}, "
        f"{diag.precision}): [{colour}]{diag.verdict}[/] - input wait {frac:.0%} of the "
        "training time",
        soft_wrap=False,
    )
    t = Table(title="measured side by side (examples/s)")
    t.add_column("variant")
    t.add_column("examples/s", justify="right")
    t.add_column("note")
    t.add_row("(a) pipeline alone", number(diag.pipeline.examples_per_s.median), "")
    t.add_row(
        "(b) model on one cached batch", number(diag.compute.examples_per_s.median), "compute limit"
    )
    t.add_row(
        "(c) training (pipeline + model)",
        number(diag.training.examples_per_s.median),
        f"input wait {frac:.0%}",
    )
    for name, rate in diag.variants.items():
        label = name if name.startswith(("training", "compute")) else f"compute with {name}"
        t.add_row(f"    {label}", number(rate), "what-if")
    console.print(t)
    s = Table(title="stage prefixes: the pipeline cut after each stage")
    s.add_column("stage")
    s.add_column("examples/s", justify="right")
    s.add_column("us/example added", justify="right")
    for st in diag.stages:
        mark = " [bold red]<- slowest[/]" if st.label == diag.slowest_stage else ""
        added = "-" if st.us_per_example is None else f"{st.us_per_example:.1f}"
        s.add_row(st.label + mark, number(st.examples_per_s), added)
    console.print(s)
    render_findings(diag, console)
    for note in diag.notes:
        console.print(f"[dim]note: {note}[/]")


def render_findings(diag: Diagnosis, console: Console) -> None:
    if not diag.findings:
        why = ": the run is not input-bound, so no input advice"
        console.print("[green]no findings[/]" + (why if diag.verdict == "not input-bound" else ""))
        return
    f = Table(title="findings, most promising first", show_lines=True)
    f.add_column("#", justify="right")
    # Folded, not cut with "...": a run-file key or address longer than its column stays
    # complete (tables are laid out for 100 columns when the report is redirected).
    for name in ("finding", "evidence", "change", "expected"):
        f.add_column(name, overflow="fold")
    for i, fd in enumerate(diag.findings, 1):
        where = f"\n[dim]{fd.stage}[/]" if fd.stage else ""
        title = f"[bold]{fd.code}[/]\n{fd.title}{where}"
        f.add_row(str(i), title, fd.evidence, fd.change, fd.expected)
    console.print(f)


def diagnosis_json(diag: Diagnosis) -> dict[str, Any]:
    return diag.to_dict()


def render_fix(result: FixResult, console: Console) -> None:
    """The before/after table of --fix: every candidate, its measurement against the best
    so far (median of the paired ratios, their spread), kept or not."""
    title = f"--fix: training {number(result.before)} -> {number(result.after)} examples/s"
    c = result.check
    if c is None:
        title += " (no change kept)"
    else:
        kept = "" if c.faster else "; not faster, nothing kept"
        title += f" ({c.ratio:.2f}x, paired {c.low:.2f}-{c.high:.2f}{kept})"
    if result.predicted is not None:
        title += f"; predicted ~{result.predicted:.2f}x"
    t = Table(title=title)
    t.add_column("change", overflow="fold")
    # Each trial's rate beside the best so far's, timed in the same paired repeats: the
    # ratio is theirs (rows timed at other moments of a busy host do not compare).
    t.add_column("training examples/s (vs best so far)", justify="right")
    t.add_column("predicted", justify="right")
    t.add_column("measured vs best so far", justify="right")
    t.add_column("kept")
    t.add_column("note", overflow="fold")
    t.add_row("(before)", number(result.before), "", "", "", "")
    for trial in result.trials:
        ratio = (
            "-" if trial.ratio is None else f"{trial.ratio:.2f}x ({trial.low:.2f}-{trial.high:.2f})"
        )
        kept = "[green]yes[/]" if trial.kept else "no"
        predicted = "-" if trial.predicted is None else f"~{trial.predicted:.2f}x"
        rate = number(trial.examples_per_s)
        if trial.examples_per_s is not None and trial.baseline is not None:
            rate += f" (vs {number(trial.baseline)})"
        t.add_row(trial.change, rate, predicted, ratio, kept, trial.reason)
    console.print(t)
    if result.code_edits:
        console.print("the kept changes as edits of your pipeline's code:")
        for edit in result.code_edits:
            console.print(f"  {edit}", highlight=False, soft_wrap=True)
    if result.compile_kwargs:
        args = ", ".join(f"{k}={v!r}" for k, v in result.compile_kwargs.items())
        console.print(f"for model.fit: model.compile(..., {args})", highlight=False)
    for line in result.withheld:
        console.print(f"withheld: {line}", highlight=False, soft_wrap=True, markup=False)
    for path in result.written:
        console.print(f"wrote {path}")
    if not result.written:
        console.print("no change was kept: nothing written")
