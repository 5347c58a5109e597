"""The gains --fix predicts (doctor/fix/predicted.py): the cost model run with the findings of
the changes kept, each trial over the best so far, changes of one stage compounding."""

from __future__ import annotations

import pytest

from tfperf.doctor.evidence.cost_model import Costs
from tfperf.doctor.evidence.findings import Diagnosis, Finding, StageTiming
from tfperf.doctor.fix.predicted import predict
from tfperf.doctor.fix.trials import FixTrial
from tfperf.measure import Measurement, Run


def measured(name: str, rate: float) -> Measurement:
    return Measurement(name, [Run(seconds=1.0, batches=int(rate) // 10, examples=int(rate))])


def finding(code: str, wall: float, cpu: float | None, stage: int | None = 2) -> Finding:
    return Finding(code, code, None, "", "", "", 1.0, "input", stage, wall, cpu)


def diagnosis(findings: list[Finding], training: float = 5000.0) -> Diagnosis:
    # One map stage of 100 us per example in a 5000 ex/s pipeline on one core's worth of
    # CPU (200 us per example); a model of 1M ex/s on 2 cores.
    costs = Costs(5000.0, 200e-6, 1e6, 1e-6, cores=2)
    stage = StageTiming(2, "map#2", "map", 10_000.0, 100.0)
    return Diagnosis(
        "t",
        "m",
        64,
        "float32",
        measured("pipeline", 5000.0),
        measured("compute", 1e6),
        measured("training", training),
        [stage],
        "map#2",
        "highly input-bound",
        findings,
        costs=costs,
    )


def trial(name: str, kept: bool = True) -> FixTrial:
    return FixTrial(name, name, 1.0, kept)


def vectorize_then_parallel(code: str, saves: float) -> tuple[list[FixTrial], float | None]:
    """Both trials kept: the map vectorized (saving `saves` s per example), then what is
    left of it made parallel (saving 50 us of wall time, no CPU)."""
    diag = diagnosis([finding(code, saves, saves), finding("sequential_map", 50e-6, 0.0)])
    trials = [trial("vectorize per-example maps"), trial("map parallelization + autotune")]
    return trials, predict(trials, diag)


def test_changes_of_one_stage_compound_rather_than_add():
    trials, whole = vectorize_then_parallel("per_example_parse", 95e-6)
    # parse batched: 200 - 95 = 105 us per example -> 9,524 ex/s (2 cores / 106 us allow more)
    assert trials[0].predicted == pytest.approx(1e6 / 105 / 5000, rel=1e-3)
    # then the 5 us left, half in parallel: 102.5 us; the two add up to 97.5 us saved, not 145
    assert trials[1].predicted == pytest.approx(105 / 102.5, rel=1e-3)
    assert whole == pytest.approx(1e6 / 102.5 / 5000, rel=1e-3)


def test_a_stage_costs_at_least_what_its_timed_rewrite_saves():
    # The stage's 100 us (prefix differences) is less than the 150 us the vectorized pipeline
    # was timed to save: a parallel map of what is left cannot make the pair slower.
    trials, whole = vectorize_then_parallel("per_example_map", 150e-6)
    assert trials[0].predicted == pytest.approx(1e6 / 50 / 5000, rel=1e-3)
    assert trials[1].predicted >= 1.0
    assert whole >= trials[0].predicted


def test_a_parallel_map_gains_nothing_when_the_cores_are_taken():
    # the pipeline already keeps both cores busy: 400 us of CPU per example at 5000 ex/s
    diag = diagnosis([finding("sequential_map", 50e-6, 0.0)])
    diag.costs = Costs(5000.0, 400e-6, 1e6, 1e-6, cores=2)
    trials = [trial("map parallelization + autotune")]
    assert predict(trials, diag) == pytest.approx(1.0, abs=0.01)


def test_only_kept_changes_count_and_prefetch_makes_them_overlap():
    diag = diagnosis(
        [finding("per_example_parse", 95e-6, 95e-6), finding("no_prefetch", 0.0, None, None)],
        training=2500.0,  # half of what the model allows: input and step take turns
    )
    trials = [trial("vectorize per-example maps", kept=False), trial("prefetch at the end")]
    whole = predict(trials, diag)
    assert trials[0].predicted == pytest.approx(1e6 / 105 / 5000, rel=1e-3)  # not kept
    assert trials[1].predicted == pytest.approx(2.0, rel=1e-3)  # overlap: 2500 -> 5000
    assert whole == pytest.approx(2.0, rel=1e-3)


def test_nothing_kept_predicts_nothing():
    diag = diagnosis([finding("per_example_parse", 95e-6, 95e-6)])
    assert predict([trial("vectorize per-example maps", kept=False)], diag) is None


def test_vectorize_that_only_made_maps_parallel_is_predicted_as_parallel():
    diag = diagnosis([finding("sequential_map", 50e-6, 0.0)])  # no map runs on batches
    trials = [trial("vectorize per-example maps")]
    whole = predict(trials, diag)
    assert trials[0].predicted == pytest.approx(whole) and whole > 1.0


def test_a_map_held_before_the_batch_by_a_filter_is_not_the_batch_moves_gain():
    # map#2 (a parse) -> filter#3 -> map#4 -> batch#5: batch_before_map moves map#4 only.
    diag = diagnosis(
        [finding("per_example_parse", 95e-6, 95e-6), finding("per_example_map", 40e-6, 40e-6, 4)]
    )
    diag.stages += [
        StageTiming(3, "filter#3", "filter", 9_000.0, 10.0),
        StageTiming(4, "map#4", "map", 6_000.0, 40.0),
        StageTiming(5, "batch#5", "batch", 6_000.0, 0.0),
    ]
    trials = [trial("batch before per-example map")]
    whole = predict(trials, diag)
    assert trials[0].predicted == pytest.approx(1e6 / 160 / 5000, rel=1e-3)  # 200 - 40 us
    assert whole == pytest.approx(trials[0].predicted)
    # with no filter between them, vectorize moves the parse too: the two savings together
    diag.stages = [s for s in diag.stages if s.kind != "filter"]
    trials = [trial("vectorize per-example maps")]
    predict(trials, diag)
    assert trials[0].predicted == pytest.approx(1e6 / 65 / 5000, rel=1e-3)  # 200 - 95 - 40
