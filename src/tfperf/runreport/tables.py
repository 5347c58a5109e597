"""The report's words and tables as HTML (every value escaped): the verdict with the run's
summary, each finding with its evidence, change and expected vs measured gain, --fix's
trials, and the notes on what is missing."""

from __future__ import annotations

from html import escape
from typing import Any

from tfperf.util.format import number, paired_ratio, what_if_row

VERDICT_CLASS = {"highly": "bad", "moderately": "warn", "not": "good"}


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _dim(text: Any) -> str:
    return f'<div class="dim">{_e(text)}</div>' if text else ""


def ratio_range(t: dict[str, Any] | None) -> str:
    """'1.39x paired (0.88-1.90)': a timed trial's median paired ratio and their range, as
    the CLI writes it; else '-'."""
    if not t or t.get("ratio") is None:
        return "-"
    return paired_ratio(t["ratio"], t["low"], t["high"])


def ratio_text(t: dict[str, Any] | None) -> str:
    """'1.39x paired (0.88-1.90), kept' for a timed trial (dropped: faster in its trial,
    not in the final check); '-' otherwise."""
    if not t or t.get("ratio") is None:
        return "-"
    status = "kept" if t["kept"] else ("dropped" if t.get("dropped") else "not kept")
    return f"{ratio_range(t)}, {status}"


def gain_text(value: float | None) -> str:
    return "-" if value is None else f"~{value:.2f}x"


def table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape what you put in them)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    thead = f"<thead><tr>{th}</tr></thead>" if any(head) else ""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}">{thead}<tbody>{body}</tbody></table>'


def verdict_html(diagnosis: dict[str, Any] | None, summary: dict[str, Any] | None) -> str:
    """The verdict line (how input-bound, the input wait) and the run's training summary."""
    parts = []
    if diagnosis:
        verdict = diagnosis["verdict"]
        cls = VERDICT_CLASS.get(verdict.split()[0], "warn")
        # The words the CLI prints (older doctor.json files: the bare verdict and fraction).
        shown = diagnosis.get("verdict_text") or verdict
        wait = diagnosis.get("wait_text") or f"input wait {diagnosis['input_bound_fraction']:.0%}"
        parts.append(
            f'<p class="verdict {cls}">{_e(shown)}</p><p>{_e(wait)} of the '
            f"training time, timed by the doctor: <b>{_e(diagnosis['source'])}</b> with model "
            f"<b>{_e(diagnosis['model'])}</b> (batch {_e(diagnosis['batch_size'])}, "
            f"{_e(diagnosis['precision'])}); slowest stage: "
            f"<b>{_e(diagnosis.get('slowest_stage') or 'not measured')}</b></p>"
        )
    if summary:
        # The texts the CLI printed, with their spread (older summary.json files: the bare
        # figures).
        rate = summary.get("examples_per_sec_text") or number(summary.get("examples_per_sec"))
        wait = summary.get("input_bound_fraction_text") or (
            f"{summary.get('input_bound_fraction', 0.0):.1%}"
        )
        rows = [
            ["steps", f"{_e(summary.get('start_step', 0))} -> {_e(summary.get('steps'))}"],
            ["examples/s", _e(rate)],
            ["input-bound fraction", _e(wait)],
            ["final loss", _e(f"{summary.get('final_loss', float('nan')):.5g}")],
            ["stopped because", _e(summary.get("stopped_because"))],
            ["precision", _e(summary.get("precision"))],
            ["strategy", _e(summary.get("strategy"))],
        ]
        parts.append("<h3>the training run (tfperf train)</h3>" + table(["", ""], rows, "kv"))
        if summary.get("spread_note"):
            parts.append(f'<p class="note">{_e(summary["spread_note"])}</p>')
    return "".join(parts)


def rates_table(diagnosis: dict[str, Any]) -> str:
    d = diagnosis

    def shown(key: str) -> str:  # the CLI's words where doctor.json has them
        return _e(d[key].get("examples_per_s_text") or number(d[key]["examples_per_s"]))

    rows = [
        ["(a) pipeline alone", shown("pipeline"), ""],
        ["(b) model on one cached batch", shown("compute_limit"), "limit"],
        ["(c) training", shown("training"), "pipeline + model"],
    ]
    for name, rate in d.get("variants", {}).items():
        label, text, note = what_if_row(name, rate, d.get("variants_shown", {}).get(name))
        rows.append([_e(label), _e(text), _e(note)])
    head = ["measured side by side", "examples/s (min-max)", "note"]
    caption = d.get("variants_caption")
    return table(head, rows, "num") + (f'<p class="note">{_e(caption)}</p>' if caption else "")


def stages_table(diagnosis: dict[str, Any]) -> str:
    rows = []
    slowest = diagnosis.get("slowest_stage")
    marked = diagnosis.get("slowest_stages") or ([slowest] if slowest else [])
    word = "slowest (within noise)" if len(marked) > 1 else "slowest"
    for s in diagnosis.get("stages", []):
        mark = f' <span class="bad">&#9664; {word}</span>' if s["label"] in marked else ""
        added = "-" if s.get("us_per_example") is None else f"{s['us_per_example']:.1f}"
        rate = s.get("examples_per_s")
        shown = number(rate) if rate else _e(s.get("error") or "-")
        rows.append([_e(s["label"]) + mark, shown, _e(s.get("cost_text") or added)])
    rest = diagnosis.get("unattributed")
    if rest:
        rows.append(["unattributed", "", _e(rest.get("cost_text"))])
    head = ["stage prefix", "examples/s", "us/example added (per-round range)"]
    notes = _dim(rest.get("text")) if rest else ""
    if len(marked) > 1:
        notes += _dim(f"slowest stage: {slowest}")
    return table(head, rows, "num") + notes


def measured_by_code(fix: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """{finding code: the --fix trial that made its change} (the kept one first), from the
    codes each trial records in 'findings'."""
    out: dict[str, dict[str, Any]] = {}
    for t in (fix or {}).get("trials", []):
        if t.get("ratio") is None:
            continue
        for code in t.get("findings") or []:
            if code not in out or (t["kept"] and not out[code]["kept"]):
                out[code] = t
    return out


def findings_html(findings: list[dict[str, Any]], measured: dict[str, dict[str, Any]]) -> str:
    if not findings:
        return "<p>no findings</p>"
    rows = []
    for i, f in enumerate(findings, 1):
        where = f'<div class="dim">{_e(f["stage"])}</div>' if f.get("stage") else ""
        title = f"<b>{_e(f['code'])}</b><div>{_e(f['title'])}</div>{where}"
        expected = gain_text(f.get("expected_speedup")) + _dim(f["expected"])
        trial = measured.get(f["code"])
        got = ratio_text(trial)
        if trial:
            got += _dim(f"{trial['change']}: {trial.get('reason')}")
        rows.append([str(i), title, _e(f["evidence"]), _e(f["change"]), expected, got])
    head = ["#", "finding", "evidence", "change", "expected gain", "measured by --fix"]
    return table(head, rows, "findings")


def fix_headline(fix: dict[str, Any]) -> str:
    """FixResult's headline as the CLI prints it (older doctor.json files: made from their
    bare rates and the check)."""
    text = fix.get("headline") or _old_headline(fix)
    written = "".join(f"<li>wrote <code>{_e(p)}</code></li>" for p in fix.get("written", []))
    return f"<p><b>{_e(text)}</b></p>" + (f"<ul>{written}</ul>" if written else "")


def _old_headline(fix: dict[str, Any]) -> str:
    before, after = number(fix["before_examples_per_s"]), number(fix["after_examples_per_s"])
    text = f"training {before} -> {after} examples/s"
    check = fix.get("check")
    if check is None:
        text += " (no change kept)"
    else:
        kept = "" if check.get("verdict") == "faster" else "; not faster, nothing kept"
        text += f" ({check['ratio']:.2f}x, paired {check['low']:.2f}-{check['high']:.2f}{kept})"
    if fix.get("predicted_speedup"):
        text += f"; predicted ~{fix['predicted_speedup']:.2f}x"
    return text


def trials_table(fix: dict[str, Any]) -> str:
    """The CLI's --fix table: FixResult's rows, each trial's rate beside the best so far's
    (older doctor.json files: their bare rates)."""
    head = ["change", "training examples/s (vs best so far)", "predicted"]
    head += ["measured vs best so far", "kept"]
    if "rows" in fix:
        rows = []
        for r in fix["rows"]:
            kept = '<span class="good">kept</span>' if r["status"] == "kept" else _e(r["status"])
            rows.append(
                [_e(r["change"]), _e(r["examples_per_s_text"]), _e(r["predicted_text"])]
                + [_e(r["ratio_text"]), kept + _dim(r["note"])]
            )
        return table(head, rows, "num")
    rows = [["(before)", number(fix["before_examples_per_s"]), "", "", ""]]
    for t in fix.get("trials", []):
        kept = '<span class="good">kept</span>' if t["kept"] else "not kept"
        rate, predicted = number(t.get("examples_per_s")), gain_text(t.get("predicted"))
        rows.append(
            [_e(t["change"]), rate, predicted, ratio_range(t), kept + _dim(t.get("reason"))]
        )
    return table(head, rows, "num")


def notes_html(notes: list[str], css: str = "note") -> str:
    return "".join(f'<p class="{css}">{_e(n)}</p>' for n in notes)
