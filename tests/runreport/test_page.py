"""runreport/page: one self-contained HTML page from a run's parts: plotly's JavaScript
inlined once, a section per part the run has (the missing ones named with their command),
the file written whole where asked (a run folder's report.html by default), and the doctor's
own report without a run folder."""

from __future__ import annotations

import re
from html import unescape

from tfperf.runreport.page import render, write_doctor_report, write_run_report
from tfperf.runreport.run_dir import DOCTOR_NAME, RunRecord, missing_parts, save_json, save_summary

TRAIN = {"step/examples_per_sec": [(5, 1000.0), (10, 1100.0)], "loss": [(5, 0.9), (10, 0.7)]}


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([a-z]+)">', html)


def _charts(html: str) -> list[str]:
    return re.findall(r'<div id="(chart-[a-z]+)"', html)


def test_a_whole_run_has_every_section_and_the_library_once(diagnosis, fix):
    diagnosis["notes"] = ["timed on a busy host"]
    rec = RunRecord(
        summary={"runfile": "r.yaml", "steps": 10, "examples_per_sec": 1050.0},
        doctor={"diagnosis": diagnosis, "fix": fix},
        train=TRAIN,
        eval={"loss": [(10, 0.8)]},
    )
    html = render(rec, "my run")
    assert html.startswith("<!DOCTYPE html>") and "<title>my run</title>" in html
    assert "run file r.yaml" in html
    assert _sections(html) == [
        "verdict", "rates", "stages", "findings", "trials", "training", "eval", "notes",
    ]  # fmt: skip
    assert _charts(html) == [
        "chart-rates", "chart-stages", "chart-findings", "chart-trials", "chart-training",
        "chart-eval",
    ]  # fmt: skip
    assert html.count("window.PlotlyConfig") == 1  # the library, inlined with the first chart
    assert 'class="missing"' not in html and "timed on a busy host" in html


def test_a_run_with_only_training_logs_names_what_is_missing():
    rec = RunRecord(train=TRAIN)
    rec.missing = missing_parts(rec)
    html = render(rec)
    assert _sections(html) == ["verdict", "training", "eval"]
    assert _charts(html) == ["chart-training"]
    notes = re.findall(r'<p class="missing">(.*?)</p>', html)
    assert len(notes) == 3  # no summary and no diagnosis (verdict), no eval
    assert any("`tfperf doctor RUNFILE`" in n for n in notes)
    assert any("`tfperf evaluate RUNFILE --watch --all`" in n for n in notes)


def test_a_diagnosis_without_fix_asks_for_fix(diagnosis):
    rec = RunRecord(doctor={"runfile": "d.yaml", "diagnosis": diagnosis, "fix": None})
    rec.missing = missing_parts(rec)
    html = render(rec)
    assert '<section id="trials">' in html and "`tfperf doctor d.yaml --fix`" in html
    assert "chart-trials" not in html


def test_write_run_report_writes_report_html_in_the_run_folder(tmp_path, diagnosis, fix):
    run = tmp_path / "run"
    save_summary(run, "r.yaml", {"steps": 10, "examples_per_sec": 1050.0})
    save_json(run / DOCTOR_NAME, {"runfile": "r.yaml", "diagnosis": diagnosis, "fix": fix})
    path, rec = write_run_report(run)
    assert path == run / "report.html" and set(rec.missing) == {"train", "eval"}
    assert "19,107" in path.read_text()
    other, _ = write_run_report(run, tmp_path / "out" / "r.html")
    assert other.read_text().startswith("<!DOCTYPE html>")


def test_the_doctors_report_without_a_run_folder(tmp_path, diagnosis, fix):
    html = write_doctor_report(tmp_path / "d.html", diagnosis, fix).read_text()
    assert "<title>tfperf doctor report</title>" in html
    assert _sections(html)[:5] == ["verdict", "rates", "stages", "findings", "trials"]
    only_fix = write_doctor_report(tmp_path / "f.html", None, fix).read_text()
    assert _sections(only_fix)[0] == "trials" and "chart-trials" in only_fix


def _outside_scripts(html: str) -> str:
    return re.sub(r"<script[^>]*>.*?</script>", "<script></script>", html, flags=re.S)


def test_paths_are_relative_to_the_run_folder(tmp_path, diagnosis, fix):
    # the report is mailed: it carried the run file's absolute path four times
    project = tmp_path / "project"
    run, runfile = project / "runs" / "a", project / "run.yaml"
    written = [str(project / "run.optimized.yaml"), str(run / "pipeline.py")]
    notes = [f"data read from {run}/data, cache at {run}"]
    diagnosis = {**diagnosis, "notes": notes}
    save_json(
        run / DOCTOR_NAME,
        {"runfile": str(runfile), "diagnosis": diagnosis, "fix": {**fix, "written": written}},
    )
    html = write_run_report(run)[0].read_text()
    assert str(tmp_path) not in html
    page = _outside_scripts(html)
    assert "<title>tfperf report: a</title>" in page
    assert "run file ../../run.yaml" in page and "paths relative to the run folder a" in page
    assert "<code>../../run.optimized.yaml</code>" in page and "<code>pipeline.py</code>" in page
    assert "data read from data, cache at ." in page
    assert "`tfperf train ../../run.yaml`" in page  # the missing parts' commands too
    # a run file that shares no folder with the run's but the root: its name alone
    save_json(run / DOCTOR_NAME, {"runfile": "/elsewhere/r.yaml", "diagnosis": diagnosis})
    assert "run file r.yaml" in write_run_report(run)[0].read_text()


def test_a_folder_of_two_runs_says_which_run_each_section_shows(tmp_path, diagnosis, fix):
    run = tmp_path / "runs" / "default"  # the default train.out_dir of two run files
    save_json(run / DOCTOR_NAME, {"runfile": str(tmp_path / "a.yaml"), "diagnosis": diagnosis})
    save_summary(run, str(tmp_path / "b.yaml"), {"steps": 10, "examples_per_sec": 1050.0})
    html = _outside_scripts(write_run_report(run)[0].read_text())
    assert _sections(html)[0] == "runs"
    runs = unescape(re.search(r'<section id="runs">.*?</section>', html, re.S).group(0))
    assert "the doctor's of run file ../../a.yaml, training's of run file ../../b.yaml" in runs
    for section in ("stages", "findings"):
        body = re.search(rf'<section id="{section}">.*?</section>', html, re.S).group(0)
        assert "shows doctor.json from `tfperf doctor ../../a.yaml`, written " in body
        assert "b.yaml" not in body
    rates = re.search(r'<section id="rates">.*?</section>', html, re.S).group(0)
    assert "`tfperf doctor ../../a.yaml`" in rates and "`tfperf train ../../b.yaml`" in rates
    save_json(run / DOCTOR_NAME, {"runfile": str(tmp_path / "b.yaml"), "diagnosis": diagnosis})
    assert '<section id="runs">' not in write_run_report(run)[0].read_text()
