"""Renders what the doctor found: rich tables for people (verdict, the three measurements,
stage prefixes, findings; the before/after table of --fix) and plain dicts for --json.
It computes nothing. The diagnosis's own tables are drawn in evidence/findings.py (so that
`str(diagnosis)` gives them too) and re-exported here."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfperf.doctor.evidence.findings import Diagnosis, render_diagnosis, render_findings
from tfperf.doctor.fix.trials import FixResult

__all__ = ["diagnosis_json", "render_diagnosis", "render_findings", "render_fix"]


def diagnosis_json(diag: Diagnosis) -> dict[str, Any]:
    return diag.to_dict()


def render_fix(result: FixResult, console: Console) -> None:
    """The before/after table of --fix: the final check's headline, every candidate with its
    rate beside the best so far's (medians with their repeats' min-max), the paired ratio,
    kept, not kept or dropped. The figures are FixResult's own texts, as --json and the
    HTML report show them."""
    t = Table(title=escape(result.headline))
    t.add_column("change", overflow="fold")
    # Each trial's rate beside the best so far's, timed in the same paired repeats: the
    # ratio is theirs (rows timed at other moments of a busy host do not compare).
    t.add_column("training examples/s (vs best so far)", justify="right")
    t.add_column("predicted", justify="right")
    t.add_column("measured vs best so far", justify="right")
    t.add_column("kept")
    t.add_column("note", overflow="fold")
    for row in result.rows():
        status = "[green]kept[/]" if row["status"] == "kept" else row["status"]
        t.add_row(
            escape(row["change"]),
            row["examples_per_s_text"],
            row["predicted_text"],
            row["ratio_text"],
            status,
            escape(row["note"]),
        )
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
