"""The steps-per-call rule (rules/steps_per_call.py): the compute limit at the run's own steps
per call (train.steps_per_loop; model.fit's steps_per_execution) timed against doctor.steps
per call on the user's model; a step too short for one call each is a compute finding with
both the run-file and the model.compile change, judged by paired ratios when they were
timed."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.evidence.evidence import PAIRED_COMPUTE, STEPS_VARIANT
from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.steps_per_call import rule_steps_per_call
from tfperf.measure import Measurement, Run, compare


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


def _measured(name: str, rates: list[float]) -> Measurement:
    return Measurement(name, [Run(1.0, 1, int(r)) for r in rates])


def test_few_steps_per_call_is_a_finding_with_both_the_run_file_and_fit_change(evidence):
    rates = {"pipeline": 9000.0, "compute": 3000.0, "training": 2900.0}
    ctx = evidence(_dataset(), **rates, variants={f"{STEPS_VARIANT}1": 1000.0}, steps_per_call=30)
    (f,) = [f for f in run_rules(ctx) if f.code == "steps_per_call"]
    assert f.kind == "compute" and f.expected_speedup == pytest.approx(3.0)
    assert "at 1 step per call" in f.evidence and "at 30 steps per call" in f.evidence
    assert "train.steps_per_loop: auto" in f.change and "steps_per_execution=30" in f.change
    # the same rate at one step per call: nothing to say
    ctx = evidence(_dataset(), **rates, variants={f"{STEPS_VARIANT}1": 2950.0}, steps_per_call=30)
    assert not [f for f in run_rules(ctx) if f.code == "steps_per_call"]


def test_paired_repeats_straddling_1_give_no_finding(evidence):
    """Slower by the medians, but not in every pair with the limit timed beside it."""
    rates = {"pipeline": 9000.0, "compute": 3000.0, "training": 2900.0}
    name = f"{STEPS_VARIANT}1"
    ref = _measured(PAIRED_COMPUTE, [3000, 3000, 3000])
    noisy = _measured(name, [2000, 3300, 2100])
    ctx = evidence(
        _dataset(),
        **rates,
        variants={name: 2100.0},
        paired={name: compare(ref, noisy)},
        steps_per_call=30,
    )
    assert rule_steps_per_call(ctx) == []
    slow = _measured(name, [1000, 1100, 1050])  # ~3x slower in every pair
    ctx = evidence(
        _dataset(),
        **rates,
        variants={name: 1050.0},
        paired={name: compare(ref, slow)},
        steps_per_call=30,
    )
    (f,) = rule_steps_per_call(ctx)
    assert f.code == "steps_per_call" and "train.steps_per_loop: auto (or 30)" in f.change


def test_no_finding_without_the_what_if(evidence):
    assert rule_steps_per_call(evidence(_dataset(), steps_per_call=30)) == []


def test_each_pair_must_show_the_gain_on_its_own(evidence):
    """flowers_list_files beside two CPU hogs: one step per call of a ~25 ms conv step read
    0.98, 0.66 and 0.75 of the limit timed beside it (a 1.3x median gain that the next run
    read as 1.07x): a pair short of STEPS_GAIN leaves it unsaid among three pairs, and among
    five one short pair is taken."""
    rates = {"pipeline": 13000.0, "compute": 1300.0, "training": 1290.0}
    name = f"{STEPS_VARIANT}1"

    def found(ratios: list[float]) -> list:
        ref = _measured(PAIRED_COMPUTE, [1000] * len(ratios))
        m = _measured(name, [1000 * r for r in ratios])
        paired = {name: compare(ref, m)}
        ctx = evidence(
            _dataset(), **rates, variants={name: 1300.0 * 0.75}, paired=paired, steps_per_call=30
        )
        return rule_steps_per_call(ctx)

    assert found([0.978, 0.66, 0.746]) == []
    (f,) = found([0.978, 0.66, 0.746, 0.70, 0.80])
    assert "1.02-1.52x per pair" in f.evidence, f.evidence
    assert found([0.85, 0.66, 0.746]), "each pair gains 1.1x or more"


def test_on_a_busy_host_the_gain_must_reach_the_busy_tie(evidence):
    """flowers_list_files beside two CPU hogs, one run of five: every pair of one step per call
    read 0.66-0.71 of the limit (1.41-1.52x, median ~1.45x), the other runs ~1.0x. On a busy
    host that gain is below registry.BUSY_TIE and unsaid; idle, or at 3x, it is advised."""
    rates = {"pipeline": 13000.0, "compute": 1300.0, "training": 1290.0}
    name = f"{STEPS_VARIANT}1"

    def found(ratios: list[float], busy: bool) -> list:
        ref = _measured(PAIRED_COMPUTE, [1000] * len(ratios))
        paired = {name: compare(ref, _measured(name, [1000 * r for r in ratios]))}
        variants = {name: 1300.0 * sorted(ratios)[len(ratios) // 2]}
        ctx = evidence(
            _dataset(),
            **rates,
            variants=variants,
            paired=paired,
            steps_per_call=30,
            busy_host=busy,
        )
        return rule_steps_per_call(ctx)

    flowers = [0.66, 0.71, 0.69]
    assert found(flowers, busy=True) == []
    assert found(flowers, busy=False), "idle, every pair's 1.4x gain is advised"
    assert found([0.33, 0.35, 0.34], busy=True), "a 3x gain stands out on a busy host too"


def test_one_stalled_pair_does_not_hide_a_gain_beyond_the_busy_tie(evidence):
    """A tiny Keras step at one step per call read ~0.15x of the limit (6.5x) in its pairs;
    in one suite run a pair of the three stalled and the finding was withheld. Beyond the
    busy tie one short pair among three is taken; below it every pair must gain."""
    rates = {"pipeline": 900000.0, "compute": 300000.0, "training": 290000.0}
    name = f"{STEPS_VARIANT}1"

    def found(ratios: list[float]) -> list:
        ref = _measured(PAIRED_COMPUTE, [1000] * len(ratios))
        paired = {name: compare(ref, _measured(name, [1000 * r for r in ratios]))}
        variants = {name: 300000.0 * sorted(ratios)[len(ratios) // 2]}
        ctx = evidence(
            _dataset(), **rates, variants=variants, paired=paired, steps_per_call=20, busy_host=True
        )
        return rule_steps_per_call(ctx)

    assert found([0.15, 0.16, 0.95]), "6.5x in two pairs of three, one stalled"
    assert found([0.15, 0.95, 0.97]) == []  # the median gain is the stalled pairs'
    assert found([0.15, 0.95]) == []  # two pairs: each must gain
    assert found([0.69, 0.71, 0.95]) == []  # 1.4x: every pair must gain, as before
