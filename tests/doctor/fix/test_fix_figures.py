"""Issue 31 section 1 for --fix and optimize: every figure of the report comes from one
named measurement and carries its spread; the CLI text, --json and the HTML report show the
same figures; the first row says which measurement it is (the final check's original, or
the diagnosis's training when the check was not measured); a final check that finds no
gain leaves no row saying "kept" and writes no file claiming a gain. The probes return
fixed, varying rates (the rules of the report are the point, not the timing); the
FixResults rendered are built from them or directly."""

from __future__ import annotations

import io
import itertools
import json
import re
from html import unescape
from pathlib import Path

import pytest
from rich.console import Console

from tfperf.config import load_config
from tfperf.doctor.fix.entry import yaml_header
from tfperf.doctor.fix.pipeline_file import write_optimized_pipeline
from tfperf.doctor.fix.trials import (
    DIAGNOSIS,
    FINAL_CHECK,
    FixResult,
    FixTrial,
    Outcome,
    final_check,
    rate_text,
)
from tfperf.doctor.report.render import render_fix
from tfperf.measure import Comparison, Probe, Run
from tfperf.runreport.page import write_doctor_report
from tfperf.util.format import paired_ratio as ratio_text

REPEATS = type("D", (), {"repeats": 3})()  # the doctor section: three paired repeats


def cycling(name: str, rates: list[float]) -> Probe:
    """A probe whose repeats run at `rates` in turn (examples/s)."""
    it = itertools.cycle(rates)
    return Probe(name, lambda: Run(1.0, 10, int(next(it))))


def cli_text(result: FixResult) -> str:
    console = Console(file=io.StringIO(), width=400, record=True, color_system=None)
    render_fix(result, console)
    return console.export_text()


def html_text(result: FixResult, tmp_path: Path) -> str:
    page = write_doctor_report(tmp_path / "fix.html", fix=result.to_dict()).read_text()
    return unescape(page)


def figures(text: str) -> list[str]:
    """Every rate ('12,345 (11,000-13,000)') and paired ratio ('1.30x paired (...)')."""
    rate = r"\d[\d,]*(?:\.\d)? \([\d,.]+-[\d,.]+\)"
    ratio = r"\d+\.\d\dx paired \(\d+\.\d\d-\d+\.\d\d\)"
    return re.findall(f"{rate}|{ratio}", text)


def a_result() -> FixResult:
    """Two kept trials then a final check that finds no gain (measured, with spreads)."""
    trials = [
        FixTrial("vectorize", "vectorize per-example maps", 2000.0, True, "faster", 2.0, 1.8, 2.2),
        FixTrial("prefetch", "prefetch at the end", 1100.0, True, "faster", 1.1, 1.06, 1.2),
        FixTrial("cache", "cache after the read", None, False, "not applicable"),
    ]
    for t in trials[:2]:  # the best so far's rates in the same repeats, with spreads
        t.baseline, t.baseline_range = 1000.0, (900.0, 1100.0)
        t.examples_per_s_range = (t.examples_per_s * 0.9, t.examples_per_s * 1.1)
    original = lambda n: cycling(n, [1000, 1200, 1100])  # noqa: E731
    slower = lambda n: cycling(n, [950, 1150, 1000])  # noqa: E731
    out = final_check(original, slower, REPEATS, lambda _: None, trials)
    assert not out.keep
    return out.into(FixResult(out.before, out.after, trials, [], check=out.check))


def test_a_final_check_without_gain_leaves_no_row_kept_and_says_each_was_dropped():
    result = a_result()
    assert result.before == 1100 and result.before_range == (1000, 1200)
    assert result.optimized == 1000 and result.optimized_range == (950, 1150)
    assert "not faster, no speed change kept" in result.headline
    statuses = [r["status"] for r in result.rows()]
    assert statuses == ["", "dropped", "dropped", "not kept"]
    for t in result.trials[:2]:
        assert t.reason.startswith("faster in its trial; dropped: the final check found no gain")
    # the two rates and the paired ratio, each with its spread, and which is which
    head = result.headline
    assert "original 1,100 (1,000-1,200) vs optimized 1,000 (950-1,150)" in head
    assert ratio_text(result.check.ratio, result.check.low, result.check.high) in head
    assert result.rows()[0]["change"] == FINAL_CHECK


def test_text_json_and_html_show_the_same_figures(tmp_path):
    result = a_result()
    text = cli_text(result)
    data = json.loads(json.dumps(result.to_dict()))
    page = html_text(result, tmp_path)
    # every figure with its spread the text shows, --json and the page show too
    shown = figures(text)
    assert len(shown) >= 6  # the check's two rates and ratio; two trials' rates, vs, ratios
    for fig in shown:
        assert fig in json.dumps(data), fig
        assert fig in page, fig
    assert sorted(figures(" ".join(r["examples_per_s_text"] for r in data["rows"]))) == sorted(
        figures(" ".join(r["examples_per_s_text"] for r in result.rows()))
    )
    # the HTML keeps the CLI's rate of the best so far beside each trial's
    assert "2,000 (1,800-2,200) vs 1,000 (900-1,100)" in text
    assert "2,000 (1,800-2,200) vs 1,000 (900-1,100)" in page
    assert data["headline"] in text.replace("\n", " ") or data["headline"][:60] in text
    assert data["headline"] in page
    assert "dropped" in page and '<span class="good">kept</span>' not in page


def test_a_final_check_not_measured_says_the_rate_is_the_diagnosis():
    trials = [FixTrial("prefetch", "prefetch at the end", 1500.0, True, "faster", 1.5, 1.2, 1.8)]
    out = Outcome(700.0, 700.0, None, False, DIAGNOSIS)
    result = out.into(FixResult(out.before, out.after, trials, []))
    assert result.rows()[0]["change"] == DIAGNOSIS
    assert result.headline.startswith(f"training: {DIAGNOSIS}, 700 examples/s")
    assert result.to_dict()["before_source"] == DIAGNOSIS


def test_a_rate_and_a_paired_ratio_are_written_with_their_spreads():
    assert rate_text(1234.0, (1100.0, 1300.0)) == "1,234 (1,100-1,300)"
    assert rate_text(1234.0, (1234.2, 1234.4)) == "1,234"  # one point: no range
    assert rate_text(None, None) == "-"
    assert ratio_text(1.3, 1.1, 1.52) == "1.30x paired (1.10-1.52)"
    assert ratio_text(None, None, None) == "-"


@pytest.mark.parametrize("faster", [True, False])
def test_the_written_header_and_module_agree_with_the_report(tmp_path, faster):
    """Kept: the header and the module's docstring carry the report's headline and each
    kept trial's figures. Not faster: a RAM cap kept without a speed trial is written,
    said as kept without a gain, the dropped trials as dropped, no claim of a gain."""
    (tmp_path / "run.yaml").write_text("data:\n  pipeline: some_pipe:make\n")
    cfg = load_config(tmp_path / "run.yaml")
    trial = FixTrial(
        "vectorize", "vectorize per-example maps", 2000.0, True, "faster", 2.0, 1.8, 2.2
    )
    trial.baseline, trial.baseline_range, trial.examples_per_s_range = 1000.0, (900, 1100), None
    ratios = (1.9, 2.0, 2.1) if faster else (0.9, 1.0, 1.02)
    check = Comparison(ratios, "faster" if faster else "same")
    if not faster:
        trial.kept, trial.dropped = False, True
        trial.reason = "faster in its trial; dropped: the final check found no gain"
    cap = FixTrial("cap shuffle", "cap the shuffle buffer", None, True, "RAM budget: 10 MiB")
    kept = ["vectorize per-example maps"] if faster else []
    result = FixResult(1000.0, 2000.0 if faster else 1000.0, [cap, trial], [], check=check)
    result.pipeline_changes = [*kept, "cap the shuffle buffer"]
    result.before_source, result.before_range = FINAL_CHECK, (900.0, 1100.0)
    result.optimized, result.optimized_range = 2000.0 if faster else 1000.0, (900.0, 2100.0)
    header = yaml_header(result)
    out = tmp_path / "run.optimized.yaml"
    written = write_optimized_pipeline(cfg, result, out, header)
    module = out.with_suffix(".py").read_text()
    assert written == [str(out.with_suffix(".py")), str(out)]
    assert result.headline in header and result.headline in module
    lines = header.splitlines()
    if faster:
        assert "#   kept: vectorize per-example maps (2,000 vs 1,000 (900-1,100) ex/s" in header
        assert "vectorize per-example maps: 2.00x paired (1.80-2.20), faster" in module
        assert "kept without a speed gain" not in header
    else:
        assert "not faster, no speed change kept" in lines[0]
        assert "kept without a speed gain: cap the shuffle buffer" in lines[0]
        assert any(ln.startswith("#   dropped: vectorize") for ln in lines)
        assert not any(ln.startswith("#   kept: vectorize") for ln in lines)
        assert "  - cap the shuffle buffer: RAM budget: 10 MiB" in module
        assert "vectorize" not in module.split("The same changes")[0].split("kept, in")[1]
