"""runreport/tables: the report's words and tables as HTML from a doctor's result: every
value escaped, the verdict coloured, the slowest stage marked, each finding beside the --fix
trial that measured it (a kept one first), and the trials' ratios and ranges."""

from __future__ import annotations

from html import escape

from tfperf.runreport.tables import (
    findings_html,
    fix_headline,
    gain_text,
    measured_by_code,
    notes_html,
    rates_table,
    ratio_range,
    ratio_text,
    stages_table,
    table,
    trials_table,
    verdict_html,
)


def test_ratios_and_gains_in_words():
    timed = {"ratio": 1.391, "low": 0.88, "high": 1.9, "kept": False}
    assert ratio_range(timed) == "1.39x paired (0.88-1.90)"
    assert ratio_text(timed) == "1.39x paired (0.88-1.90), not kept"
    assert ratio_text({**timed, "dropped": True}) == "1.39x paired (0.88-1.90), dropped"
    assert ratio_text({**timed, "kept": True}).endswith(", kept")
    assert ratio_range({"ratio": None}) == ratio_text(None) == "-"
    assert (gain_text(None), gain_text(4.746)) == ("-", "~4.75x")


def test_table_cells_are_html_and_an_empty_head_is_left_out():
    html = table(["a", "b"], [["<b>1</b>", "2"]], "num")
    assert html.startswith('<table class="num"><thead><tr><th>a</th><th>b</th>')
    assert "<td><b>1</b></td><td>2</td>" in html
    assert "<thead>" not in table(["", ""], [["k", "v"]])


def test_verdict_and_summary(diagnosis):
    html = verdict_html(diagnosis, None)
    assert '<p class="verdict bad">highly input-bound</p>' in html
    assert "input wait 97% of the training time" in html and "map#2 (sequential)" in html
    summary = {"steps": 40, "examples_per_sec": 12345.6, "final_loss": 0.123456}
    html = verdict_html({**diagnosis, "verdict": "not input-bound"}, summary)
    assert 'class="verdict good"' in html
    assert "<td>0 -> 40</td>" in html and "<td>12,346</td>" in html and "0.12346" in html
    # The CLI's texts, with their spread and what it is, where summary.json has them.
    texts = {"examples_per_sec_text": "12,346 (9,000-13,000)", "spread_note": "in brackets: x"}
    html = verdict_html(None, {**summary, **texts, "input_bound_fraction_text": "2.0% (1-3%)"})
    assert "<td>12,346 (9,000-13,000)</td>" in html and "<td>2.0% (1-3%)</td>" in html
    assert '<p class="note">in brackets: x</p>' in html
    assert verdict_html(None, None) == ""


def test_rates_and_stages_tables(diagnosis):
    diagnosis["variants"] = {"float16": 900000.0}
    rates = rates_table(diagnosis)
    assert "<td>19,107</td>" in rates and "<td>841,156</td>" in rates
    assert "compute with float16" in rates
    diagnosis["stages"].append({"label": "<batch>", "examples_per_s": None, "error": "failed"})
    stages = stages_table(diagnosis)
    assert 'map#2 (sequential) <span class="bad">&#9664; slowest</span>' in stages
    assert "flat_map#1 (files=2)</td>" in stages  # not marked
    assert "&lt;batch&gt;" in stages and "<td>failed</td>" in stages


def test_each_finding_is_measured_by_its_kept_trial_first(diagnosis, fix):
    fix["trials"].append({**fix["trials"][0], "kept": False, "ratio": 0.9, "change": "other"})
    fix["trials"].reverse()  # the not-kept trial of the same finding comes first
    measured = measured_by_code(fix)
    assert set(measured) == {"per_example_parse"}  # untimed trials measure nothing
    assert measured["per_example_parse"]["change"] == "vectorize per-example maps"
    assert measured_by_code(None) == {}
    html = findings_html(diagnosis["findings"], measured)
    assert html.count("<tr>") == 3  # the head and two findings
    assert "14.42x paired (9.04-19.80), kept" in html and "~4.75x" in html
    assert findings_html([], {}) == "<p>no findings</p>"


def test_values_are_escaped(diagnosis):
    diagnosis["findings"][0]["evidence"] = "<script>alert(1)</script>"
    html = findings_html(diagnosis["findings"], {})
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert notes_html(["a < b"]) == '<p class="note">a &lt; b</p>'


def test_fix_headline_and_trials(fix):
    head = fix_headline(fix)
    assert "training 27,537 -&gt; 105,932 examples/s (4.89x, paired 2.69-7.09)" in head
    assert "predicted ~5.03x" in head and "<code>/runs/run.optimized.yaml</code>" in head
    slower = {**fix, "check": {**fix["check"], "verdict": "slower"}}
    assert "not faster, nothing kept" in fix_headline(slower)
    assert "(no change kept)" in fix_headline({**fix, "check": None})
    trials = trials_table(fix)
    assert trials.count("<tr>") == 4  # the head, (before) and two trials
    assert '<span class="good">kept</span>' in trials and "not applicable" in trials


def test_the_html_shows_the_text_reports_verdict_range_intervals_and_remainder():
    """The same figures as the CLI's text and --json: built from one Diagnosis."""
    from tfperf.doctor.evidence.findings import Diagnosis, Remainder, StageTiming
    from tfperf.measure import Measurement, Run

    def rate(name: str, waits: tuple[float, ...] = (0.0, 0.0, 0.0)) -> Measurement:
        return Measurement(name, [Run(1.0, 100, 1_000, wait_seconds=w) for w in waits])

    diag = Diagnosis(
        "tf.data.Dataset",
        "m",
        10,
        "float32",
        Measurement("pipeline", [Run(1.0, 100, n) for n in (900, 1_000, 1_100)]),
        rate("compute limit"),
        rate("training", (0.049, 0.14, 0.09)),
        [
            StageTiming(0, "map#1", "map", 5000.0, 180.0, us_low=170.0, us_high=190.0),
            StageTiming(1, "shuffle#2", "shuffle", 4000.0, 73.0, us_low=60.0, us_high=175.0),
        ],
        "map#1 or shuffle#2 (within noise)",
        "moderately input-bound",
        [],
        slowest_stages=["map#1", "shuffle#2"],
        unattributed=Remainder(-81.0, -100.0, -55.0, 253.0, 172.0),
        verdict_range="between moderately and not input-bound: 5-14%",
    )
    d = diag.to_dict()
    head, stages = verdict_html(d, None), stages_table(d)
    text = " ".join(str(diag).split())
    for shown in (diag.verdict_range, diag.wait_text):
        assert escape(shown) in head and shown in text
    assert '<p class="verdict warn">between moderately and not input-bound: 5-14%</p>' in head
    for cell in ("180.0 (170.0-190.0)", "73.0 (60.0-175.0)", "-81.0 (-100.0 to -55.0)"):
        assert f"<td>{cell}</td>" in stages and cell in text
    assert stages.count("&#9664; slowest (within noise)") == 2
    rates = rates_table(d)
    assert "<td>1,000 (900-1,100)</td>" in rates and "1,000 (900-1,100)" in text
    assert escape(d["unattributed"]["text"]) in stages and d["unattributed"]["text"] in text
    assert "slowest stage: map#1 or shuffle#2 (within noise)" in stages
