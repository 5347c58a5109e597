"""runreport/charts: each plotly figure drawn from a doctor's result and a run's scalars
holds the run's own numbers (the three rates, each stage's microseconds with the slowest in
red, expected vs measured gains, the timed trials, training and eval series), and each is
None when its data is missing."""

from __future__ import annotations

import pytest

from tfperf.runreport import charts


def test_rates_on_one_axis(diagnosis):
    fig = charts.rates_chart(diagnosis, {"examples_per_sec": 17000.0})
    (bar,) = fig.data
    assert list(bar.x) == [19107.0, 841156.3, 18896.2, 17000.0]
    assert bar.y[-1] == "training run (tfperf train)"
    assert charts.rates_chart(None, {"examples_per_sec": 5.0}).data[0].x == (5.0,)
    assert charts.rates_chart(None, {}) is None


def test_stage_waterfall_marks_the_slowest_stage(diagnosis):
    fig = charts.stages_waterfall(diagnosis)
    waterfall, slowest = fig.data
    assert list(waterfall.x) == [10.08, 68.95, pytest.approx(1e6 / 19107.0)]
    assert waterfall.y[1] == f"map#2 (sequential) {charts.SLOWEST_MARK}"
    assert waterfall.y[-1] == "pipeline alone"
    # the red bar over the slowest stage starts where the stages before it end
    assert slowest.marker.color == charts.RED and list(slowest.base) == [10.08]
    # Stages tied within noise: each gets its red bar and its mark.
    first = diagnosis["stages"][0]["label"]
    tied = {**diagnosis, "slowest_stages": [first, "map#2 (sequential)"]}
    tied["slowest_stage"] = f"{first} or map#2 (sequential) (within noise)"
    fig = charts.stages_waterfall(tied)
    assert [list(bar.base) for bar in fig.data[1:]] == [[0.0], [10.08]]
    assert fig.data[0].y[0] == f"{first} {charts.SLOWEST_MARK}"
    for stage in diagnosis["stages"]:
        stage["examples_per_s"] = None
    assert charts.stages_waterfall(diagnosis) is None  # no stage was timed
    assert charts.stages_waterfall(None) is None


def test_findings_expected_beside_measured(diagnosis, fix):
    measured = {"per_example_parse": fix["trials"][0]}
    expected, got = charts.findings_chart(diagnosis["findings"], measured).data
    assert list(expected.x) == ["per_example_parse", "no_interleave"]
    assert list(expected.y) == [4.75, 1.11]
    assert list(got.y) == [14.42, None]
    assert list(got.error_y.array) == [pytest.approx(19.8 - 14.42), 0.0]
    assert list(got.marker.color) == [charts.GREEN, charts.ORANGE]  # kept, not measured
    for f in diagnosis["findings"]:
        f["expected_speedup"] = None
    assert charts.findings_chart(diagnosis["findings"], {}) is None


def test_only_timed_trials_are_drawn_with_their_predictions(fix):
    measured, predicted = charts.trials_chart(fix).data
    assert list(measured.y) == ["vectorize per-example maps"]  # the untimed one is left out
    assert list(measured.x) == [14.42] and list(measured.text) == ["kept"]
    assert list(predicted.x) == [4.747]
    fix["trials"][0]["ratio"] = None
    assert charts.trials_chart(fix) is None and charts.trials_chart(None) is None


def test_training_and_eval_series():
    train = {
        charts.TRAIN_RATE: [(5, 1000.0), (10, 1200.0)],
        charts.WAIT_FRACTION: [(5, 0.5), (10, 0.25)],
        "loss": [(5, 0.9), (10, 0.7)],
    }
    rate, wait = charts.training_chart(train).data
    assert list(rate.x) == [5, 10] and list(wait.y) == [50.0, 25.0]  # wait in percent
    assert charts.training_chart({"loss": [(1, 1.0)]}) is None
    eval_ = {"mae": [(10, 0.3)], "loss": [(10, 0.8)]}
    fig = charts.eval_chart(eval_, train)
    # loss first, with training's loss beside it; mae has no training series
    assert [t.name for t in fig.data] == ["train loss", "eval loss", "eval mae"]
    assert list(fig.data[1].y) == [0.8]
    assert charts.eval_chart({}, train) is None


def test_text_from_the_data_is_no_live_markup_in_a_chart(diagnosis, fix):
    # plotly reads labels as HTML: a stage, finding or trial named with <a href> was a link
    link = "<a href='https://example.com/x'>click</a>"
    diagnosis = {**diagnosis, "stages": [dict(s, label=link) for s in diagnosis["stages"]]}
    diagnosis["findings"] = [dict(f, code=link + f["code"]) for f in diagnosis["findings"]]
    fix = {**fix, "trials": [dict(t, change=link) for t in fix["trials"]]}
    figures = [
        charts.stages_waterfall(diagnosis),
        charts.findings_chart(diagnosis["findings"], {}),
        charts.trials_chart(fix),
        charts.eval_chart({link: [(1, 0.5)]}, {link: [(1, 0.4)]}),
    ]
    for fig in figures:
        text = fig.to_json()
        assert "<a " not in text and "&lt;a href=" in text and "&gt;click&lt;" in text
