"""Renders what the doctor found: rich tables for people (verdict, the three measurements,
stage prefixes, findings; the before/after table of --fix) and plain dicts for --json.
It computes nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tfperf.doctor.rules import Diagnosis


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def render_diagnosis(diag: Diagnosis, console: Console) -> None:
    """The verdict, measurements, stages and findings as rich tables."""
    frac = diag.input_bound_fraction
    colour = {"highly": "red", "moderately": "yellow"}.get(diag.verdict.split()[0], "green")
    console.print(
        f"[bold]{diag.source}[/] with model [bold]{diag.model}[/] (batch {diag.batch_size}, "
        f"{diag.precision}): [{colour}]{diag.verdict}[/] - input wait {frac:.0%} of the "
        "training time"
    )
    t = Table(title="measured side by side (examples/s)")
    t.add_column("variant")
    t.add_column("examples/s", justify="right")
    t.add_column("note")
    t.add_row("(a) pipeline alone", _num(diag.pipeline.examples_per_s), "")
    t.add_row("(b) model on one cached batch", _num(diag.compute.examples_per_s),
              "compute limit")  # fmt: skip
    t.add_row("(c) training (pipeline + model)", _num(diag.training.rate.examples_per_s),
              f"input wait {frac:.0%}")  # fmt: skip
    for name, rate in diag.variants.items():
        label = name if name.startswith(("training", "compute")) else f"compute with {name}"
        t.add_row(f"    {label}", _num(rate), "what-if")
    console.print(t)
    s = Table(title="stage prefixes: the pipeline cut after each stage")
    s.add_column("stage")
    s.add_column("examples/s", justify="right")
    s.add_column("us/example added", justify="right")
    for st in diag.stages:
        mark = " [bold red]<- slowest[/]" if st.label == diag.slowest_stage else ""
        s.add_row(st.label + mark, _num(st.examples_per_s),
                  "-" if st.us_per_example is None else f"{st.us_per_example:.1f}")  # fmt: skip
    console.print(s)
    render_findings(diag, console)
    for note in diag.notes:
        console.print(f"[dim]note: {note}[/]")


def render_findings(diag: Diagnosis, console: Console) -> None:
    if not diag.findings:
        console.print("[green]no findings[/]" + (
            ": the run is not input-bound, so no input advice" if
            diag.verdict == "not input-bound" else ""))  # fmt: skip
        return
    f = Table(title="findings, most promising first", show_lines=True)
    f.add_column("#", justify="right")
    f.add_column("finding")
    f.add_column("evidence")
    f.add_column("change")
    f.add_column("expected")
    for i, fd in enumerate(diag.findings, 1):
        where = f"\n[dim]{fd.stage}[/]" if fd.stage else ""
        f.add_row(str(i), f"[bold]{fd.code}[/]\n{fd.title}{where}", fd.evidence, fd.change,
                  fd.expected)  # fmt: skip
    console.print(f)


def diagnosis_json(diag: Diagnosis) -> dict[str, Any]:
    return diag.to_dict()


def render_fix(result: Any, console: Console) -> None:
    """The before/after table of --fix: every candidate, its measurement, kept or not."""
    t = Table(title=f"--fix: training {_num(result.before)} -> {_num(result.after)} examples/s "
              f"({result.speedup:.2f}x)")  # fmt: skip
    t.add_column("change")
    t.add_column("training examples/s", justify="right")
    t.add_column("kept")
    t.add_column("note")
    t.add_row("(before)", _num(result.before), "", "")
    for trial in result.trials:
        t.add_row(trial.change, _num(trial.examples_per_s),
                  "[green]yes[/]" if trial.kept else "no", trial.reason)  # fmt: skip
    console.print(t)
    for path in result.written:
        console.print(f"wrote {path}")
