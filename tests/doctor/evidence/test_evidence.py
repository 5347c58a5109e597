"""What the doctor's rules read (doctor/evidence/evidence.py): a what-if beats or loses to the
compute limit or training by its paired ratios when it was timed beside them (every pair on
one side of 1, their median beyond the margin), by the medians otherwise; a stage's cost and
share of the pipeline's time; the cost model's gain of a faster or cheaper pipeline or a
faster step. The `evidence` fixture builds it on a real dataset's graph."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.evidence.evidence import PAIRED_COMPUTE, PAIRED_TRAINING, XLA_VARIANT
from tfperf.doctor.evidence.findings import StageTiming
from tfperf.measure import Measurement, Run, compare


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)


def _measured(name: str, rates: list[float]) -> Measurement:
    return Measurement(name, [Run(1.0, 1, int(r)) for r in rates])


def test_medians_decide_when_nothing_was_paired(evidence):
    ctx = evidence(_dataset(), compute=1000.0, training=500.0, variants={"v": 1200.0})
    assert ctx.beats_compute("v", 0.1) and not ctx.beats_compute("v", 0.25)
    assert ctx.beats_training("v", 1.0) and not ctx.beats_training("v", 1.5)
    assert not ctx.beats_compute("not timed", 0.1)
    slow = evidence(_dataset(), compute=1000.0, variants={"v": 800.0})
    assert slow.loses_to_compute("v", 0.2) and not slow.loses_to_compute("v", 0.3)
    assert not slow.loses_to_compute("not timed", 0.1)


def test_paired_ratios_decide_when_they_were_timed(evidence):
    ref = _measured(PAIRED_COMPUTE, [1000, 1000, 1000])
    # Faster in every pair, 1.5x the median: beats; a median above the medians' says nothing.
    steady = {XLA_VARIANT: compare(ref, _measured(XLA_VARIANT, [1400, 1500, 1600]))}
    ctx = evidence(_dataset(), compute=1000.0, variants={XLA_VARIANT: 900.0}, paired=steady)
    assert ctx.beats_compute(XLA_VARIANT, 0.1) and not ctx.beats_compute(XLA_VARIANT, 0.6)
    # One pair below 1: neither faster nor slower.
    noisy = {XLA_VARIANT: compare(ref, _measured(XLA_VARIANT, [900, 1500, 1600]))}
    ctx = evidence(_dataset(), compute=1000.0, variants={XLA_VARIANT: 1500.0}, paired=noisy)
    assert not ctx.beats_compute(XLA_VARIANT, 0.1)
    assert not ctx.loses_to_compute(XLA_VARIANT, 0.1)
    slower = {XLA_VARIANT: compare(ref, _measured(XLA_VARIANT, [500, 520, 480]))}
    ctx = evidence(_dataset(), compute=1000.0, variants={XLA_VARIANT: 1500.0}, paired=slower)
    assert ctx.loses_to_compute(XLA_VARIANT, 0.9) and not ctx.loses_to_compute(XLA_VARIANT, 1.1)
    # Training what-ifs against training timed in the same rounds.
    train = _measured(PAIRED_TRAINING, [500, 500, 500])
    paired = {"t": compare(train, _measured("t", [600, 620, 610]))}
    ctx = evidence(_dataset(), training=500.0, paired=paired)
    assert ctx.beats_training("t", 0.2) and not ctx.beats_training("t", 0.3)


def test_one_pair_against_a_gain_is_taken_among_five_pairs_not_among_three(evidence):
    """diagnose's second look: all but one of SECOND_LOOK_PAIRS pairs above 1 with the
    median gain beats; one of three against does not; two of five against does not."""

    def ctx(rates: list[float]):
        ref = _measured(PAIRED_COMPUTE, [1000] * len(rates))
        paired = {XLA_VARIANT: compare(ref, _measured(XLA_VARIANT, rates))}
        return evidence(_dataset(), compute=1000.0, variants={XLA_VARIANT: 1300.0}, paired=paired)

    assert ctx([900, 1300, 1400, 1250, 1350]).beats_compute(XLA_VARIANT, 0.1)
    assert not ctx([900, 1300, 1400]).beats_compute(XLA_VARIANT, 0.1)
    assert not ctx([900, 950, 1400, 1250, 1350]).beats_compute(XLA_VARIANT, 0.1)
    assert not ctx([900, 1050, 1080, 1090, 1350]).beats_compute(XLA_VARIANT, 0.1)  # median 1.08x


def test_the_cost_model_shares_the_cores_other_work_left(evidence):
    """jena_window_generator beside two CPU busy loops: its pipeline alone 6,700 ex/s on
    150 us of CPU each, its model 5,200 on 190 us. On 2 free cores training could reach the
    compute limit; on the 1.0 the host left, the two together allow ~2,900 ex/s, and a
    pipeline without most of its CPU work gains ~1.7x there against ~1.0x."""
    rates = {"pipeline": 6700.0, "compute": 5200.0, "pipeline_cpu": 150e-6, "compute_cpu": 190e-6}
    idle = evidence(_dataset(), **rates)
    busy = evidence(_dataset(), **rates, free_cores=1.0)
    assert idle.costs.cores == idle.cores and busy.costs.cores == 1.0
    assert idle.costs.training() == pytest.approx(5200.0)
    assert busy.costs.training() == pytest.approx(1 / 340e-6)
    assert idle.speedup_pipeline(60000.0, 140e-6) == pytest.approx(1.0)
    # 1 core / (10 + 190 us) = 5,000 ex/s against 1 / 340 us
    assert busy.speedup_pipeline(60000.0, 140e-6) == pytest.approx(5000 * 340e-6)


def test_a_stage_costs_its_timed_time_per_example(evidence):
    timed = [
        StageTiming(1, "map#1", "map", 400.0, 2000.0),
        StageTiming(2, "b", "batch", None, None),
    ]
    ctx = evidence(_dataset(), pipeline=400.0, compute=1000.0, stages=timed)
    assert ctx.stage_cost(1) == pytest.approx(2e-3) and ctx.stage_cost(2) == 0.0
    assert ctx.share(1) == pytest.approx(0.8) and ctx.stage_cost(0) == 0.0
    assert ctx.limit == 400.0  # the slower side


def test_the_cost_model_gains_of_a_changed_pipeline_or_step(evidence):
    # 1,000 ex/s keeping one core busy (1 ms of CPU each); the model 2,000 ex/s at 0.5 ms.
    ctx = evidence(
        _dataset(),
        pipeline=1000.0,
        pipeline_cpu=1e-3,
        compute=2000.0,
        compute_cpu=0.5e-3,
        training=900.0,
        cores=2,
    )
    assert ctx.costs.pipeline_cores == pytest.approx(1.0)
    assert ctx.cpu_of(0.5e-3) == pytest.approx(0.5e-3)
    assert ctx.pipeline_without(0.5e-3) == pytest.approx(2000.0)
    # Twice as fast but as costly: both sides need 1.5 ms of CPU on 2 cores, 1,333 ex/s.
    assert ctx.speedup_pipeline(2000.0) == pytest.approx((2 / 1.5e-3) / 1000.0)
    # Twice as fast and half the work: 2,000 ex/s.
    assert ctx.speedup_pipeline(2000.0, cpu_saved=0.5e-3) == pytest.approx(2.0)
    # A faster step uses less CPU per example, but the pipeline still sets the pace.
    assert ctx.speedup_compute(4000.0) == pytest.approx(1000.0 / 1000.0)
    gpu = evidence(_dataset(), pipeline=3000.0, compute=1000.0, accelerator=True, cores=2)
    assert gpu.speedup_compute(2000.0) == pytest.approx(2.0)
