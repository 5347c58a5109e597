"""The XLA what-if and its finding: the doctor times the user's model with its train step
compiled by XLA beside the compute limit (doctor.what_ifs: xla), names it when it is
faster beyond the noise, and `--fix` tries train.jit_compile: true like any run-file change."""

from __future__ import annotations

from types import SimpleNamespace

import tensorflow as tf

import tfperf
from tfperf.config import config_from_dict
from tfperf.doctor.evidence.evidence import XLA_VARIANT
from tfperf.doctor.fix.runfile import run_file_candidates
from tfperf.doctor.rules import run_rules

FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


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


def test_the_doctor_times_the_step_under_xla_on_the_users_model():
    """A model that sets the pace (batches from memory, two wide layers): the compute
    what-ifs run, XLA among them, on the user's own model."""
    import keras

    x = tf.random.normal([64, 256])
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat(200).prefetch(4)
    inp = keras.Input((256,))
    h = keras.layers.Dense(512, activation="relu")(keras.layers.Dense(512, "relu")(inp))
    model = keras.Model(inp, keras.layers.Dense(1)(h))
    diag = tfperf.diagnose(ds, model, overrides=[*FAST, "doctor.what_ifs=[xla]"])
    if diag.verdict == "highly input-bound":  # a starved prefetch on a loaded host: gated
        assert XLA_VARIANT not in diag.variants, diag.variants
    else:
        assert diag.variants[XLA_VARIANT] > 0, diag.variants
