"""Renders what the doctor found: rich tables for people (verdict, the three measurements,
stage prefixes, findings; the before/after table of --fix) and plain dicts for --json.
It computes nothing. The diagnosis's own tables are drawn in evidence/findings.py (so that
`str(diagnosis)` gives them too) and re-exported here."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tfperf.doctor.evidence.findings import Diagnosis, render_diagnosis, render_findings
from tfperf.doctor.fix.trials import FixResult
from tfperf.util.format import number

__all__ = ["diagnosis_json", "render_diagnosis", "render_findings", "render_fix"]


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
