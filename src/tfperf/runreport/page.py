"""One self-contained HTML page from a `RunRecord`: styles and plotly's JavaScript inlined,
nothing fetched when it is viewed. Sections: the verdict, the three rates, the stage
prefixes, the findings, --fix's trials, training over the steps and eval per checkpoint;
a part the run folder lacks is named with the command that makes it. Paths are shown
relative to the run folder (the page can be mailed), and each section says which run it
shows: a folder two run files trained or diagnosed into says so at the top."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from tfperf.runreport import charts, tables
from tfperf.runreport.run_dir import (
    DOCTOR_NAME,
    REPORT_NAME,
    SUMMARY_NAME,
    RunRecord,
    missing_parts,
    read_run_dir,
)
from tfperf.util.files import write_text_atomic
from tfperf.util.format import shell_command

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
  max-width: 1180px; padding: 16px 24px 48px; color: #222; background: #fff; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px;
  border-bottom: 1px solid #ddd; padding-bottom: 4px; } h3 { font-size: 15px; }
.dim, .sub { color: #666; font-size: 12px; } .verdict { font-size: 26px; font-weight: 600;
  margin: 8px 0; } .bad { color: #c62828; } .warn { color: #e65100; } .good { color: #2e7d32; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f5f5f5; } table.num td:nth-child(2) { text-align: right; }
table.findings td:nth-child(3), table.findings td:nth-child(4) { max-width: 320px; }
table.kv td:first-child { color: #555; } .note { color: #555; font-size: 13px; }
.missing { background: #fff8e1; border-left: 4px solid #ffb300; padding: 6px 10px;
  font-size: 13px; } code { background: #f3f3f3; padding: 1px 4px; }
"""
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


class _Charts:
    """Figures as HTML divs: plotly's JavaScript inlined once, with the first one."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, fig: Any, name: str) -> str:
        if fig is None:
            return ""
        import plotly.io as pio

        self.count += 1
        return pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=self.count == 1,  # the whole library, inline: works offline
            config=PLOTLY_CONFIG,
            div_id=f"chart-{name}",
            default_height=f"{fig.layout.height or 400}px",
        )


def _section(key: str, title: str, body: str, missing: list[str]) -> str:
    notes = tables.notes_html(missing, "missing")
    if not body and not notes:
        return ""
    return f'<section id="{key}"><h2>{escape(title)}</h2>{notes}{body}</section>'


def relative_paths(base: Path) -> Callable[[str], str]:
    """A function rewriting the absolute paths in a text relative to the folder `base` (the
    run folder): `base/logs` becomes `logs`, a sibling folder's file `../x/run.yaml`. Paths
    that share only the root with `base` stay as they are."""
    base = base.resolve()
    folders = [base, *(p for p in base.parents if p != Path(p.anchor))]
    rules = []
    for up, folder in enumerate(folders):
        rel = "/".join([".."] * up) or "."
        at = re.escape(str(folder))
        # a whole path: not the tail of a longer one, not the head of a longer name
        rules.append((re.compile(rf"(?<![\w./-]){at}/"), "" if up == 0 else rel + "/"))
        rules.append((re.compile(rf"(?<![\w./-]){at}(?![\w.-])"), rel))

    def rewrite(text: str) -> str:
        for pattern, rel in rules:
            text = pattern.sub(rel, text)
        return text

    return rewrite


def _rewritten(data: Any, rewrite: Callable[[str], str]) -> Any:
    """`data` (JSON: dicts, lists, strings, numbers) with `rewrite` applied to every string."""
    if isinstance(data, str):
        return rewrite(data)
    if isinstance(data, dict):
        return {k: _rewritten(v, rewrite) for k, v in data.items()}
    if isinstance(data, list):
        return [_rewritten(v, rewrite) for v in data]
    return data


def _shown(rec: RunRecord, base: Path | None) -> RunRecord:
    """`rec` as the page shows it: paths relative to `base` (the run folder), so that the
    page can be mailed without the machine's folders; a run file outside `base`'s tree is
    named by its file name."""
    if base is None:
        return rec
    rewrite = relative_paths(base)

    def path(text: str) -> str:
        shown = rewrite(text)
        return Path(shown).name if Path(shown).is_absolute() else shown

    out = copy.copy(rec)
    out.summary, out.doctor = _rewritten(rec.summary, rewrite), _rewritten(rec.doctor, rewrite)
    for part in (out.summary, out.doctor):
        if part and isinstance(part.get("runfile"), str):
            part["runfile"] = path(part["runfile"])
    out.missing = {k: rewrite(v) for k, v in missing_parts(out).items() if k in rec.missing}
    return out


def _written_at(run_dir: Path | None, name: str) -> str:
    if run_dir is None:
        return ""
    try:
        at = time.localtime((run_dir / name).stat().st_mtime)
    except OSError:
        return ""
    return time.strftime(", written %Y-%m-%d %H:%M", at)


def _sources(rec: RunRecord) -> tuple[str, str, list[str]]:
    """(what the doctor's sections show, what training's show, notes for the top): which
    run each part of the folder comes from, and a warning when they are different runs."""
    doc_run = (rec.doctor or {}).get("runfile")
    train_run = (rec.summary or {}).get("runfile")
    doctor = (
        f"{DOCTOR_NAME} from `{shell_command('tfperf', 'doctor', doc_run)}`"
        f"{_written_at(rec.run_dir, DOCTOR_NAME)}"
        if rec.doctor and doc_run
        else ""
    )
    train = (
        f"{SUMMARY_NAME} and logs/ from `{shell_command('tfperf', 'train', train_run)}`"
        f"{_written_at(rec.run_dir, SUMMARY_NAME)}"
        if rec.summary and train_run
        else ""
    )
    notes = []
    if doc_run and train_run and doc_run != train_run:
        notes.append(
            f"this run folder holds the results of different runs: the doctor's of run file "
            f"{doc_run}, training's of run file {train_run} (both use it as their "
            f"train.out_dir); each section says which run it shows"
        )
    return doctor, train, notes


def _caption(*sources: str) -> str:
    shown = [s for s in sources if s]
    return f'<p class="dim">shows {escape("; ".join(shown))}</p>' if shown else ""


def render(rec: RunRecord, title: str | None = None, base: Path | None = None) -> str:
    """The report of `rec` as one HTML document; paths relative to `base` (default: the
    run folder)."""
    rec = _shown(rec, base or rec.run_dir)
    from_doctor, from_train, mixed = _sources(rec)
    both = _caption(from_doctor, from_train)
    miss = rec.missing
    doc = rec.doctor or {}
    diag, fix = doc.get("diagnosis"), doc.get("fix")
    measured = tables.measured_by_code(fix)
    figs = _Charts()
    parts = []
    if mixed:
        parts.append(_section("runs", "runs in this folder", "", mixed))
    top = tables.verdict_html(diag, rec.summary)
    top = (both if top else "") + top
    parts.append(_section("verdict", "verdict", top, _pick(miss, "doctor", "summary")))
    if diag or rec.summary:
        body = figs.div(charts.rates_chart(diag, rec.summary), "rates")
        body += tables.rates_table(diag) if diag else ""
        parts.append(_section("rates", "examples/s on one axis", both + body, []))
    doctor = _caption(from_doctor)
    if diag:
        body = figs.div(charts.stages_waterfall(diag), "stages") + tables.stages_table(diag)
        parts.append(_section("stages", "stage prefixes", doctor + body, []))
        findings = diag.get("findings", [])
        body = tables.findings_html(findings, measured)
        body += figs.div(charts.findings_chart(findings, measured), "findings")
        parts.append(_section("findings", "findings, most promising first", doctor + body, []))
    if fix:
        body = tables.fix_headline(fix) + figs.div(charts.trials_chart(fix), "trials")
        body += tables.trials_table(fix)
        parts.append(_section("trials", "--fix trials", doctor + body, []))
    elif "fix" in miss:
        parts.append(_section("trials", "--fix trials", "", [miss["fix"]]))
    train = _caption(from_train)
    body = figs.div(charts.training_chart(rec.train), "training")
    body = (train if body else "") + body
    parts.append(_section("training", "training over the steps", body, _pick(miss, "train")))
    body = figs.div(charts.eval_chart(rec.eval, rec.train), "eval")
    body = (train if body else "") + body
    parts.append(_section("eval", "eval metrics over checkpoints", body, _pick(miss, "eval")))
    if diag and diag.get("notes"):
        parts.append(_section("notes", "notes", tables.notes_html(diag["notes"]), []))
    folder = rec.run_dir.resolve().name if rec.run_dir else None
    heading = title or (f"tfperf report: {folder}" if folder else "tfperf report")
    sub = f"written {time.strftime('%Y-%m-%d %H:%M')}"
    if rec.runfile != "RUNFILE":
        sub += f" &middot; run file {escape(rec.runfile)}"
    if folder:
        sub += f" &middot; paths relative to the run folder {escape(folder)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(heading)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{escape(heading)}</h1><p class="sub">{sub}</p>{"".join(parts)}</body></html>\n'
    )


def _pick(missing: dict[str, str], *keys: str) -> list[str]:
    return [missing[k] for k in keys if k in missing]


def write_report(path: str | Path, rec: RunRecord, title: str | None = None) -> Path:
    """Writes the report of `rec` to `path` (whole or not at all); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, render(rec, title, rec.run_dir or path.parent))


def write_run_report(run_dir: str | Path, out: str | Path | None = None) -> tuple[Path, RunRecord]:
    """The report of a run folder, written to `out` (default {run_dir}/report.html)."""
    rec = read_run_dir(run_dir)
    return write_report(out or Path(run_dir) / REPORT_NAME, rec), rec


def write_doctor_report(path: str | Path, diagnosis: Any = None, fix: Any = None) -> Path:
    """The report of a doctor's result given as --json dicts (tfperf.diagnose's or
    tfperf.optimize's report, no run folder): verdict, rates, stages, findings, trials."""
    rec = RunRecord(doctor={"diagnosis": diagnosis, "fix": fix})
    return write_report(path, rec, "tfperf doctor report")
