"""Where the model runs: a host that is not input-bound gets no input trials (they cannot
show a gain and would spend the budget), unless a target (doctor.target, --target,
optimize(target=...)) says the accelerator will consume more than the pipeline gives:
then the pipeline alone is judged against it and the trials time its own rate."""

from __future__ import annotations

import keras
import tensorflow as tf

import tfperf

FAST = [
    "doctor.steps=8",
    "doctor.warmup=1",
    "doctor.repeats=2",
    "doctor.min_seconds=0.05",
    "doctor.what_ifs=[]",
]


def _heavy_model_and_fast_pipeline(batches: int = 400) -> tuple[keras.Model, tf.data.Dataset]:
    """`batches` batches from memory (nothing to wait for) into two wide layers: the model
    sets the pace on any host."""
    x = tf.random.stateless_normal([64, 256], seed=(1, 2))
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat(batches).prefetch(4)
    inp = keras.Input((256,))
    h = keras.layers.Dense(1024, activation="relu")(keras.layers.Dense(1024, "relu")(inp))
    return keras.Model(inp, keras.layers.Dense(1)(h)), ds


def test_not_input_bound_runs_no_input_trial_and_says_so():
    model, ds = _heavy_model_and_fast_pipeline()
    out, report = tfperf.optimize(ds, model, overrides=FAST, budget_s=60)
    diag = report.diagnosis
    names = [t.name for t in report.fix.trials]
    # The verdict is measured: on a loaded host a starved prefetch can read as a few % wait.
    assert diag.input_trials == (diag.verdict != "not input-bound"), diag.headline
    if not diag.input_trials:
        (skip,) = [t for t in report.fix.trials if t.name == "input changes"]
        assert "not input-bound: no input change tried" in skip.change
        assert "--target" in skip.change
        assert names == ["input changes"], str(report)  # every input candidate left out
        assert out is ds
    else:
        assert "input changes" not in names, str(report)


def test_run_file_input_candidates_only_when_input_trials():
    from types import SimpleNamespace

    from tfperf.config import config_from_dict
    from tfperf.doctor.fix.runfile import run_file_candidates

    xla = SimpleNamespace(code="xla")
    cfg = config_from_dict({"workload": "regression", "pipeline": {"prefetch": 2}})
    both = SimpleNamespace(findings=[xla], batch_size=8, variants={}, input_trials=True)
    assert [n for n, _ in run_file_candidates(cfg, both)] == ["prefetch", "cache records", "XLA"]
    compute_only = SimpleNamespace(findings=[xla], batch_size=8, variants={}, input_trials=False)
    assert [n for n, _ in run_file_candidates(cfg, compute_only)] == ["XLA"]


def test_a_target_above_the_pipeline_judges_the_pipeline_alone():
    # 32 batches: a target of 1e9 examples/s is above any pipeline whatever its length (the
    # probes repeat a finite one), and each rewrite's multiset check reads all of it (400
    # batches: half this test's CPU).
    model, ds = _heavy_model_and_fast_pipeline(batches=32)
    slow = ds.map(lambda x, y: (tf.math.sqrt(tf.abs(x)) + x, y))  # a sequential map
    _, report = tfperf.optimize(slow, model, overrides=FAST, budget_s=60, target=1e9)
    diag = report.diagnosis
    head = diag.headline
    assert diag.target == 1e9 and diag.input_bound_on_target and diag.input_trials
    assert head.startswith("verdict: input-bound on the target: the pipeline alone gives"), head
    assert "the target needs 1,000,000,000" in head and "tf.data service workers" in head
    assert head.splitlines()[0] == str(report).splitlines()[0]
    assert "input changes" not in [t.name for t in report.fix.trials]
    assert report.to_dict()["diagnosis"]["target"] == 1e9


def test_target_is_a_doctor_option(cli):
    res = cli("doctor", "--help")
    assert "--target" in res.output and "EXAMPLES_PER_S" in res.output
