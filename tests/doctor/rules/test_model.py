"""The doctor's rules about the model and the run (rules/model.py): a batch too small for the
device, a faster precision policy, the step faster under XLA (judged by paired ratios to
the compute limit timed beside it), an input iterator TensorFlow cannot checkpoint, and
input and model needing more CPU than the host has (scale out to tf.data service workers,
with the workers estimated from the per-worker rate and the compute limit). Rates as the
doctor measures them (examples/s), on real datasets' graphs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.evidence.evidence import (
    COMPUTE_BATCH_VARIANT,
    PAIRED_COMPUTE,
    PAIRED_TRAINING,
    TRAINING_BATCH_VARIANT,
    XLA_VARIANT,
)
from tfperf.doctor.fix.runfile import run_file_candidates
from tfperf.doctor.graph import lint
from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.model import rule_input_not_checkpointable, rule_precision
from tfperf.measure import Measurement, Run, compare


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


def _measured(name: str, rates: list[float]) -> Measurement:
    return Measurement(name, [Run(1.0, 1, int(r)) for r in rates])


def test_the_batch_what_if_names_the_faster_of_2x_and_4x(evidence):
    rates = {"pipeline": 90000.0, "compute": 1000.0, "training": 990.0}
    variants = {"compute at batch=16": 1900.0, "compute at batch=32": 1700.0}
    (f,) = [
        f
        for f in run_rules(evidence(_dataset(), **rates, variants=variants))
        if f.code == "small_batch"
    ]
    assert "at batch 16: 1,900 ex/s (1.9x); at batch 32: 1,700 ex/s" in f.evidence, f.evidence
    assert "pipeline.batch_size: 16" in f.change and "linear scaling rule" in f.change
    cfg = config_from_dict({"workload": "regression", "doctor": {"allow": ["batch"]}})
    diag = SimpleNamespace(findings=[f], batch_size=8, variants=variants)
    assert ("larger batch", {"pipeline.batch_size": 16}) in run_file_candidates(cfg, diag)


def test_a_faster_precision_policy_beyond_the_noise_is_named(evidence):
    rates = {"pipeline": 9000.0, "compute": 1000.0, "training": 990.0}
    variants = {"precision=mixed_bfloat16": 1600.0, "precision=mixed_float16": 1200.0}
    (f,) = rule_precision(evidence(_dataset(), **rates, variants=variants))
    assert f.code == "precision" and f.kind == "compute" and f.new_compute == 1600.0
    assert f.change.startswith("train.precision: mixed_bfloat16")
    assert "mixed_bfloat16 1,600, mixed_float16 1,200 ex/s" in f.evidence, f.evidence
    assert f.expected_speedup is not None and f.expected_speedup > 1.0
    # 5% faster: within the noise
    slight = {"precision=mixed_bfloat16": 1050.0}
    assert rule_precision(evidence(_dataset(), **rates, variants=slight)) == []
    assert rule_precision(evidence(_dataset(), **rates)) == []


def test_xla_faster_beyond_the_noise_is_a_compute_finding_with_the_run_file_change(evidence):
    rates = {"pipeline": 5000.0, "compute": 1000.0, "training": 900.0}
    ctx = evidence(_dataset(), **rates, variants={XLA_VARIANT: 1500.0})
    (xla,) = [f for f in run_rules(ctx) if f.code == "xla"]
    assert xla.kind == "compute" and xla.new_compute == 1500.0
    assert "1,000 ex/s" in xla.evidence and "1,500 ex/s with XLA (1.50x" in xla.evidence
    assert xla.change.startswith("train.jit_compile: true") and "jit_compile=True" in xla.change
    assert xla.expected_speedup and xla.expected_speedup > 1.0
    # within the noise (5% faster): no finding
    ctx = evidence(_dataset(), **rates, variants={XLA_VARIANT: 1050.0})
    assert not [f for f in run_rules(ctx) if f.code == "xla"]
    # --fix tries it as a run-file change
    cfg = config_from_dict({"workload": "regression"})
    diag = SimpleNamespace(findings=[xla], batch_size=8)
    assert ("XLA", {"train.jit_compile": True}) in run_file_candidates(cfg, diag)


def test_paired_ratios_decide_not_medians_of_phases_apart(evidence):
    """A what-if whose median looks 1.5x faster than the main phase's compute limit, but
    whose paired ratios against the limit timed beside it straddle 1: no finding."""
    ref = _measured(PAIRED_COMPUTE, [1000, 1500, 1000])
    xla = _measured(XLA_VARIANT, [1500, 1400, 1050])
    paired = {XLA_VARIANT: compare(ref, xla)}
    rates = {"pipeline": 9000.0, "compute": 1000.0, "training": 990.0}
    ctx = evidence(_dataset(), **rates, variants={XLA_VARIANT: 1400.0}, paired=paired)
    assert not [f for f in run_rules(ctx) if f.code == "xla"]
    xla = _measured(XLA_VARIANT, [1500, 2100, 1500])  # 1.4-1.5x in every pair
    paired = {XLA_VARIANT: compare(ref, xla)}
    ctx = evidence(_dataset(), **rates, variants={XLA_VARIANT: 1450.0}, paired=paired)
    assert [f for f in run_rules(ctx) if f.code == "xla"]


@pytest.mark.parametrize(
    ("variant", "reference"),
    [
        (f"{COMPUTE_BATCH_VARIANT}32", PAIRED_COMPUTE),
        (f"{TRAINING_BATCH_VARIANT}32", PAIRED_TRAINING),
    ],
)
def test_a_larger_batch_is_judged_by_its_paired_ratios_too(evidence, variant, reference):
    """The batch what-if (of the compute limit, or of training on the run file's pipeline)
    beats its reference timed in the same rounds in every pair by 1.5x, or is not named."""
    rates = {"pipeline": 90000.0, "compute": 1000.0, "training": 990.0}
    ref = _measured(reference, [1000, 1600, 1000])
    straddles = _measured(variant, [1500, 1400, 1400])  # 1.5x, 0.88x, 1.4x
    paired = {variant: compare(ref, straddles)}
    ctx = evidence(_dataset(), **rates, variants={variant: 1400.0}, paired=paired)
    assert not [f for f in run_rules(ctx) if f.code == "small_batch"]
    near = _measured(variant, [1400, 2300, 1500])  # 1.4-1.5x in every pair: under 1.5x
    paired = {variant: compare(ref, near)}
    ctx = evidence(_dataset(), **rates, variants={variant: 1450.0}, paired=paired)
    assert not [f for f in run_rules(ctx) if f.code == "small_batch"]
    beyond = _measured(variant, [1700, 2800, 1800])  # 1.7-1.8x in every pair
    paired = {variant: compare(ref, beyond)}
    ctx = evidence(_dataset(), **rates, variants={variant: 1750.0}, paired=paired)
    (f,) = [f for f in run_rules(ctx) if f.code == "small_batch"]
    assert f.evidence.startswith("training" if reference == PAIRED_TRAINING else "compute limit")


def test_an_iterator_that_cannot_be_checkpointed_is_a_resume_finding(evidence):
    # Stateful randomness; seeded stateless randomness and TF ops are saved.
    noisy = tf.data.Dataset.range(8).map(lambda x: tf.random.uniform([]) + tf.cast(x, tf.float32))
    (found,) = rule_input_not_checkpointable(evidence(noisy))
    assert "RandomUniform is stateful" in found.evidence and found.stage.startswith("map#")
    assert found.kind == "resume" and found.expected_speedup is None
    assert "train.checkpoint_input=false" in found.change
    seeded = tf.data.Dataset.range(8).map(
        lambda x: tf.random.stateless_uniform([], seed=[1, 2]) + tf.cast(x, tf.float32)
    )
    assert rule_input_not_checkpointable(evidence(seeded.shuffle(4).batch(2))) == []


# ---- scale_out: input and model need more CPU than the host has ----------------------------
def _rates(pipeline: float, compute: float, training: float, waiting: float) -> dict:
    """The Evidence fields of these rates (examples/s; `waiting`: input-bound fraction)."""
    return {
        "pipeline": pipeline,
        "compute": compute,
        "training": training,
        "input_bound_fraction": waiting,
        "compute_batch": 8.0,
        "cores": 2,
    }


def _parallel_dataset():
    ds = tf.data.Dataset.range(64).map(lambda x: x * 2, num_parallel_calls=2).batch(8)
    return ds.prefetch(2)


def test_input_and_model_fighting_for_the_cores_get_a_worker_estimate(evidence):
    # Chess-like on 2 cores: 300 ex/s of input alone, 700 of model alone, 200 together.
    found = {
        f.code: f
        for f in run_rules(evidence(_parallel_dataset(), **_rates(300.0, 700.0, 200.0, 0.45)))
    }
    f = found["scale_out"]
    workers = math.ceil(700 / 300)
    assert "more CPU than this host has" in f.title and f.kind == "input"
    assert (
        f"it takes {workers} worker{'' if workers == 1 else 's'} to feed the compute limit"
        in f.evidence
    )
    assert "pipeline.service.address=grpc://" in f.change
    assert f"tfperf data-service local --workers {workers}" in f.change
    assert f.expected_speedup == pytest.approx(700 / 200)


@pytest.mark.parametrize(
    "rates",
    [
        (1500.0, 700.0, 690.0, 0.01),  # the input fits: training at the compute limit
        (1500.0, 700.0, 650.0, 0.04),  # barely waiting: the model is the limit
    ],
)
def test_no_service_where_the_input_fits_beside_the_model(rates, evidence):
    assert "scale_out" not in {
        f.code for f in run_rules(evidence(_parallel_dataset(), **_rates(*rates)))
    }


def test_a_pipeline_slower_than_the_model_on_every_core_gets_a_worker_estimate(evidence):
    # Input-bound, not by sharing the cores: the pipeline alone (300) is below the model (700).
    found = {
        f.code: f
        for f in run_rules(evidence(_parallel_dataset(), **_rates(300.0, 700.0, 290.0, 0.40)))
    }
    f = found["scale_out"]
    assert "cannot feed the model" in f.evidence
    assert "it takes 3 workers to feed the compute limit" in f.evidence
    assert f.expected_speedup == pytest.approx(700 / 290)


def test_the_service_comes_after_every_fix_of_this_hosts_pipeline(evidence):
    # float64 batches (a fix on this host) while input and model share the cores.
    ev = evidence(_parallel_dataset(), **_rates(300.0, 700.0, 200.0, 0.45))
    wide = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float64) * 0.5).batch(8)
    ev.graph = lint.read_graph(wide.prefetch(2))
    codes = [f.code for f in run_rules(ev) if f.kind != "risk"]
    assert "scale_out" in codes and codes[-1] == "scale_out", codes
    assert len(codes) > 1, codes  # another input finding, ranked before the service


def test_a_change_that_keeps_the_results_comes_before_a_larger_batch(evidence):
    """XLA (1.3x) before the 4x batch (3x): the batch changes what the model learns, so it
    comes after the model's changes that keep the results, whatever the gains."""
    rates = {"pipeline": 90000.0, "compute": 1000.0, "training": 990.0}
    variants = {XLA_VARIANT: 1300.0, f"{COMPUTE_BATCH_VARIANT}32": 3000.0}
    found = run_rules(evidence(_dataset(), **rates, variants=variants))
    gains = {f.code: f.expected_speedup for f in found}
    assert gains["small_batch"] > 2 * gains["xla"], gains  # by gain alone it would lead
    codes = [f.code for f in found]
    assert codes.index("xla") < codes.index("small_batch"), codes


def test_a_larger_batch_comes_after_the_inputs_changes_too(evidence):
    """A pipeline without a prefetch (~1.25x) and a 4x batch of training (2x): the batch
    changes what the model learns, so the input's change that keeps the results comes first,
    and the batch still comes before the last resort of more hosts."""
    rates = {"pipeline": 1000.0, "compute": 1200.0, "training": 800.0, "input_bound_fraction": 0.3}
    variants = {f"{TRAINING_BATCH_VARIANT}32": 1600.0}
    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8)
    found = run_rules(evidence(ds, **rates, variants=variants))
    gains = {f.code: f.expected_speedup for f in found}
    assert gains["small_batch"] > 1.5 * gains["no_prefetch"], gains  # by gain it would lead
    codes = [f.code for f in found if f.kind != "risk"]
    assert codes.index("no_prefetch") < codes.index("small_batch"), codes
    if "scale_out" in codes:
        assert codes.index("small_batch") < codes.index("scale_out"), codes


def test_a_change_whose_gain_range_reaches_worth_comes_before_a_larger_batch():
    """On the cores a busy host left, regression's XLA (timed 1.3x faster every time) read
    ~1.0x in one run of five, and its batch led: a gain whose range reaches WORTH keeps the
    first tier; one whose whole range is below it comes after the batch."""
    from tfperf.doctor.evidence.findings import Finding
    from tfperf.doctor.rules.registry import WORTH, _tier

    def xla(gain: float, top: float) -> Finding:
        f = Finding("xla", "xla", None, "", "", "", gain, "compute")
        f.expected_range = (min(gain, 1.0), top)
        return f

    batch = _tier(Finding("small_batch", "batch", None, "", "", "", 2.0, "compute"))
    assert _tier(xla(1.05, 1.3)) < batch < _tier(xla(1.05, WORTH - 0.02))
    assert _tier(xla(1.3, 1.4)) < batch
