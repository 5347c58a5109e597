"""The compute side when the model sets the pace (issue: measured compute-side advice):
steps per call timed on the user's model (train.steps_per_loop, model.fit's
steps_per_execution), accelerators left idle, compute what-ifs judged by paired ratios to
the compute limit timed in the same rounds, --fix applying only what keeps the results
unless --allow says otherwise, and `optimize` handing model.fit users compile kwargs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import tensorflow as tf

import tfperf
from tfperf.config import config_from_dict
from tfperf.doctor.evidence.evidence import PAIRED_COMPUTE, STEPS_VARIANT, XLA_VARIANT
from tfperf.doctor.fix.runfile import compile_kwargs, run_file_candidates, withheld
from tfperf.doctor.rules import run_rules
from tfperf.measure import Measurement, Run, compare

FAST = ["doctor.steps=20", "doctor.warmup=2", "doctor.repeats=3", "doctor.min_seconds=0.1"]


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


def test_idle_accelerators_are_named_with_the_scaling_the_pipeline_allows(evidence):
    rates = {"pipeline": 5000.0, "compute": 2000.0, "training": 1900.0}
    ctx = evidence(_dataset(), **rates, devices=4, devices_used=1)
    (f,) = [f for f in run_rules(ctx) if f.code == "idle_devices"]
    assert "4 accelerators" in f.evidence and "the pipeline then sets the pace" in f.evidence
    assert f.change.startswith("train.strategy: mirrored (the same global batch 8, 2 per device)")
    assert f.expected_speedup == pytest.approx(2.5)  # min(pipeline, 4 x compute) / compute
    assert not [
        f
        for f in run_rules(evidence(_dataset(), **rates, devices=4, devices_used=4))
        if f.code == "idle_devices"
    ]
    assert not [
        f for f in run_rules(evidence(_dataset(), **rates, devices=0)) if f.code == "idle_devices"
    ]
    cfg = config_from_dict({"workload": "regression"})
    cands = run_file_candidates(cfg, SimpleNamespace(findings=[f], batch_size=8))
    assert ("mirrored strategy", {"train.strategy": "mirrored"}) in cands


def test_results_changing_findings_are_tried_only_when_allowed(evidence):
    rates = {"pipeline": 9000.0, "compute": 1000.0, "training": 990.0}
    ctx = evidence(
        _dataset(),
        **rates,
        variants={"precision=mixed_bfloat16": 2000.0, "compute at batch=32": 2000.0},
    )
    findings = run_rules(ctx)
    assert {"precision", "small_batch"} <= {f.code for f in findings}
    diag = SimpleNamespace(findings=findings, batch_size=8)
    cfg = config_from_dict({"workload": "regression"})
    names = [n for n, _ in run_file_candidates(cfg, diag)]
    assert "precision mixed_bfloat16" not in names and "larger batch" not in names
    lines = withheld(cfg, diag)
    assert any("--allow precision" in ln for ln in lines) and any(
        "--allow batch" in ln for ln in lines
    )
    cfg = config_from_dict({"workload": "regression", "doctor": {"allow": ["precision", "batch"]}})
    names = [n for n, _ in run_file_candidates(cfg, diag)]
    assert "precision mixed_bfloat16" in names and "larger batch" in names
    assert withheld(cfg, diag) == []


def test_compile_kwargs_name_what_keeps_the_results():
    codes = [SimpleNamespace(code=c) for c in ("xla", "steps_per_call", "precision")]
    assert compile_kwargs(SimpleNamespace(findings=codes), 30) == {
        "jit_compile": True,
        "steps_per_execution": 30,
    }
    assert compile_kwargs(SimpleNamespace(findings=[]), 30) == {}


def test_allow_names_a_wrong_value(cli, tmp_path):
    res = cli("doctor", "--allow", "precision,speed", "--set", "workload=regression")
    assert res.exit_code == 2, res.output
    assert "--allow: expected a comma-separated list of precision, batch, found 'speed'" in (
        res.stderr
    )


def test_a_fit_model_at_one_step_per_call_gets_steps_per_execution_measured():
    """A tiny model whose step is mostly dispatch, compiled as model.fit compiles it by
    default (steps_per_execution=1): the steps what-if is timed on it beside the compute
    limit, and a measured finding comes back as a compile keyword."""
    import keras

    x = tf.random.normal([32, 8])
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat(4000).prefetch(8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    overrides = [*FAST, "doctor.what_ifs=[steps]"]
    _, report = tfperf.optimize(ds, model, overrides=overrides, budget_s=60)
    diag = report.diagnosis
    assert f"{STEPS_VARIANT}1" in diag.variants, (diag.variants, diag.notes)
    # one step per call is several times slower for a step this small (5x measured)
    assert [f.code for f in diag.findings if f.code == "steps_per_call"], diag.variants
    assert report.compile_kwargs.get("steps_per_execution") == 20
    assert "model.compile(..., steps_per_execution=20)" in str(report)


def test_input_threads_beyond_the_noise_is_a_finding_and_a_run_file_key(evidence, tmp_path):
    from tfperf.doctor.evidence.evidence import PAIRED_TRAINING, THREADS_VARIANT
    from tfperf.inputs.datasets import make_input_dataset

    ref = _measured(PAIRED_TRAINING, [1000, 1100, 1000])
    few = _measured(f"{THREADS_VARIANT}1", [1200, 1300, 1250])  # 1.18-1.25x in every pair
    paired = {f"{THREADS_VARIANT}1": compare(ref, few)}
    rates = {"pipeline": 3000.0, "compute": 1500.0, "training": 1000.0}
    variants = {f"{THREADS_VARIANT}1": 1250.0}
    ctx = evidence(_dataset(), **rates, variants=variants, paired=paired, cores=2)
    (f,) = [f for f in run_rules(ctx) if f.code == "input_threads"]
    assert f.kind == "compute" and "pipeline.threads: 1" in f.change
    assert "private_threadpool_size = 1" in f.change and "on 2 shared cores" in f.evidence
    diag = SimpleNamespace(findings=[f], batch_size=8, variants=variants)
    cfg = config_from_dict({"workload": "regression"})
    assert ("input threads", {"pipeline.threads": 1}) in run_file_candidates(cfg, diag)
    # straddling 1 in its pairs: nothing
    few = _measured(f"{THREADS_VARIANT}1", [1300, 1000, 1200])
    ctx = evidence(
        _dataset(), **rates, variants=variants, paired={f"{THREADS_VARIANT}1": compare(ref, few)}
    )
    assert not [f for f in run_rules(ctx) if f.code == "input_threads"]
    # the run file's key gives the pipeline its own pool, user pipelines included
    (tmp_path / "threads_pipe.py").write_text(
        "import tensorflow as tf\n\n"
        "def make(training, batch_size):\n"
        "    return tf.data.Dataset.range(8).map(lambda x: (x, x)).batch(batch_size)\n"
    )
    cfg = config_from_dict(
        {"data": {"pipeline": "threads_pipe:make"}, "pipeline": {"threads": 1, "batch_size": 4}}
    )
    cfg.source = str(tmp_path / "run.yaml")  # where data.pipeline's module is looked for
    ds = make_input_dataset(cfg, training=False)
    assert ds.options().threading.private_threadpool_size == 1
    assert [int(x[0]) for x, _ in ds] == [0, 4]


def test_no_trial_of_a_change_already_in_effect():
    """pipeline.deterministic: null is already false in training: no trial of 'false'."""
    diag = SimpleNamespace(findings=[], batch_size=8, variants={})
    cfg = config_from_dict({"workload": "regression"})
    assert "pipeline.deterministic" not in str(run_file_candidates(cfg, diag))
    cfg = config_from_dict({"workload": "regression", "pipeline": {"deterministic": True}})
    assert ("non-deterministic order", {"pipeline.deterministic": False}) in run_file_candidates(
        cfg, diag
    )


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
