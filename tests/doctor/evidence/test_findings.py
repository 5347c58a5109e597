"""What the doctor concludes, as plain data (doctor/evidence/findings.py): the verdict first
(how input-bound, the two rates, the side to work on; against a target's rate when one is
given), whether --fix tries input changes, and the --json form with its rounded rates."""

from __future__ import annotations

import json

import pytest

from tfperf.doctor.evidence.cost_model import Costs
from tfperf.doctor.evidence.findings import (
    Diagnosis,
    Finding,
    Remainder,
    StageTiming,
    rate_json,
    training_json,
)
from tfperf.measure import Measurement, Run


def measured(name: str, rate: float, wait: float = 0.0) -> Measurement:
    """Two one-second repeats at `rate` examples/s in batches of 10, waiting `wait` s each."""
    runs = [Run(1.0, int(rate) // 10, int(rate), wait_seconds=wait) for _ in range(2)]
    return Measurement(name, runs)


def diagnosis(pipeline: float, compute: float, wait: float, verdict: str, **kw) -> Diagnosis:
    finding = Finding("no_prefetch", "t", "batch#1", "e", "c", "x", 1.5, "input", 1)
    return Diagnosis(
        "tf.data.Dataset",
        "m",
        10,
        "float32",
        measured("pipeline", pipeline),
        measured("compute limit", compute),
        measured("training", min(pipeline, compute) * (1 - wait), wait),
        [StageTiming(1, "batch#1", "batch", pipeline, 12.345)],
        "batch#1",
        verdict,
        [finding],
        **kw,
    )


def test_the_headline_names_the_side_to_work_on():
    slow_input = diagnosis(500.0, 2000.0, 0.5, "highly input-bound").headline
    assert slow_input == (
        "verdict: highly input-bound (input wait 50% of training); the pipeline alone gives "
        "500 examples/s, the model takes 2,000: work on the input pipeline"
    )
    shared = diagnosis(3000.0, 2000.0, 0.1, "moderately input-bound").headline
    assert shared.endswith(
        "work on the input pipeline's share of the CPU (input and model share it)"
    )
    model = diagnosis(3000.0, 2000.0, 0.0, "not input-bound").headline
    assert model.endswith("work on the model's step (the input keeps up)")


def test_a_target_judges_the_pipeline_alone():
    behind = diagnosis(3000.0, 2000.0, 0.0, "not input-bound", target=10_000.0)
    assert behind.input_bound_on_target and behind.input_trials
    head = behind.headline
    assert head.startswith(
        "verdict: input-bound on the target: the pipeline alone gives 3,000 examples/s; the "
        "target needs 10,000 (~4 tf.data service workers like this host"
    )
    assert head.endswith(
        "on this host: " + diagnosis(3000.0, 2000.0, 0.0, "not input-bound").headline
    )
    ahead = diagnosis(3000.0, 2000.0, 0.0, "not input-bound", target=1000.0)
    assert not ahead.input_bound_on_target and not ahead.input_trials
    assert ahead.headline.startswith(
        "verdict: the pipeline keeps up with the target (3,000 >= 1,000"
    )


def test_input_trials_only_where_the_input_waits():
    assert diagnosis(500.0, 2000.0, 0.5, "highly input-bound").input_trials
    assert not diagnosis(3000.0, 2000.0, 0.0, "not input-bound").input_trials


def test_the_json_form_rounds_the_rates_and_keeps_every_field():
    costs = Costs(500.0, 1e-3, 2000.0, 2e-4, cores=2)
    diag = diagnosis(500.0, 2000.0, 0.5, "highly input-bound", variants={"v": 123.456}, costs=costs)
    d = json.loads(json.dumps(diag.to_dict()))  # plain JSON all the way
    assert d["headline"] == diag.headline and d["input_bound_fraction"] == 0.5
    assert d["pipeline"] == {
        "examples_per_s": 500.0,
        "examples_per_s_range": [500.0, 500.0],
        "examples_per_s_text": "500",
        "batches_per_s": 50.0,
        "examples_per_batch": 10.0,
        "seconds": 2.0,
    }
    assert d["training"]["wait_s"] == 1.0 and d["training"]["input_bound_fraction"] == 0.5
    assert d["variants"] == {"v": 123.5} and d["costs"]["cores"] == 2
    assert d["stages"][0]["us_per_example"] == pytest.approx(12.345)
    assert d["findings"][0]["code"] == "no_prefetch" and d["findings"][0]["saves_wall"] is None
    assert diagnosis(500.0, 2000.0, 0.5, "highly input-bound").to_dict()["costs"] is None


def test_rate_json_and_training_json():
    m = measured("training", 1234.567, wait=0.25)
    assert rate_json(m)["examples_per_s"] == 1234.0  # int(rate) examples in one second
    spread_out = Measurement("p", [Run(1.0, 10, n) for n in (1000, 1300, 1100)])
    assert rate_json(spread_out)["examples_per_s_range"] == [1000.0, 1300.0]
    assert rate_json(spread_out)["examples_per_s_text"] == "1,100 (1,000-1,300)"
    t = training_json(m)
    assert t["wait_s"] == 0.5 and t["wall_s"] == 2.0 and t["input_bound_fraction"] == 0.25


def test_str_is_the_text_report_and_to_json_a_json_string():
    diag = diagnosis(500.0, 2000.0, 0.5, "highly input-bound")
    assert isinstance(diag.headline, str)  # an attribute, not a method
    text = str(diag)
    assert text.splitlines()[0] == diag.headline[: len(text.splitlines()[0])]
    assert diag.headline.split(";")[0] in text
    for part in ("pipeline alone", "stage prefixes", "batch#1", "no_prefetch", "findings"):
        assert part in text, part
    assert "Diagnosis(" not in text and "Measurement(" not in text  # not the dataclass dump
    assert json.loads(diag.to_json()) == json.loads(json.dumps(diag.to_dict()))


def _spread_training(fractions: list[float]) -> Measurement:
    """One one-second repeat of 1,000 examples per fraction, waiting that share of it."""
    return Measurement("training", [Run(1.0, 100, 1_000, wait_seconds=f) for f in fractions])


def test_a_verdict_near_a_boundary_is_stated_with_its_range_in_every_output():
    diag = diagnosis(500.0, 2000.0, 0.1, "moderately input-bound")
    diag.training = _spread_training([0.049, 0.14, 0.09])
    diag.verdict_range = "between moderately and not input-bound: 5-14%"
    assert diag.verdict == "moderately input-bound"  # the field scripts read is unchanged
    assert diag.wait_text == "input wait 9% (5-14% per repeat)"
    assert diag.headline.startswith(
        "verdict: between moderately and not input-bound: 5-14% (input wait 9% (5-14% per "
        "repeat) of training)"
    )
    d = json.loads(diag.to_json())
    assert d["verdict_range"] == diag.verdict_range and d["verdict_text"] == diag.verdict_range
    assert d["input_bound_range"] == [0.049, 0.14] and d["wait_text"] == diag.wait_text
    text = " ".join(str(diag).split())  # the text wraps at 100 columns
    assert diag.verdict_range in text and diag.wait_text in text
    # A clear case: the bare verdict, the range of the repeats beside it.
    clear = diagnosis(500.0, 2000.0, 0.5, "highly input-bound")
    assert clear.verdict_text == "highly input-bound" and clear.wait_text == "input wait 50%"


def test_an_inconsistent_measurement_draws_no_verdict():
    why = "training 900 examples/s is faster than the pipeline alone 500 beyond their spreads"
    diag = diagnosis(500.0, 2000.0, 0.0, "inconsistent measurement", inconsistent=why)
    assert diag.verdict_text == f"no verdict: the measurement is inconsistent ({why})"
    assert diag.headline.startswith(f"{diag.verdict_text}; the pipeline alone")
    assert "work on" not in diag.headline  # no side drawn from it
    assert diag.to_dict()["inconsistent"] == why
    assert diag.verdict_text in " ".join(str(diag).split())  # the text wraps at 100 columns


def test_stage_costs_with_intervals_ties_and_the_unattributed_remainder():
    stages = [
        StageTiming(0, "map#1", "map", 5000.0, 180.0, us_low=170.0, us_high=190.0),
        StageTiming(1, "shuffle#2", "shuffle", 4000.0, 73.0, us_low=60.0, us_high=175.0),
    ]
    rest = Remainder(-81.0, -100.0, -55.0, 253.0, 172.0)
    diag = diagnosis(
        500.0,
        2000.0,
        0.5,
        "highly input-bound",
        slowest_stages=["map#1", "shuffle#2"],
        unattributed=rest,
    )
    diag.stages, diag.slowest_stage = stages, "map#1 or shuffle#2 (within noise)"
    text = str(diag)
    assert "180.0 (170.0-190.0)" in text and "73.0 (60.0-175.0)" in text
    assert text.count("<- slowest (within noise)") == 2
    assert "slowest stage: map#1 or shuffle#2 (within noise)" in text
    assert rest.text in text and "unattributed: -81.0 (-100.0 to -55.0) us/example" in text
    d = json.loads(diag.to_json())
    assert [s["cost_text"] for s in d["stages"]] == ["180.0 (170.0-190.0)", "73.0 (60.0-175.0)"]
    assert d["stages"][1]["us_low"] == 60.0 and d["slowest_stages"] == ["map#1", "shuffle#2"]
    assert d["unattributed"]["text"] == rest.text and d["unattributed"]["us_per_example"] == -81.0
