"""`tfperf.optimize`, `tfperf.diagnose` and `tfperf.apply_rewrites` on datasets and Keras
models handed over in Python, without a run file; and the README's example run for real
(its slow pipeline sped up, the kept rewrites replayed)."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.edits import same_examples

from helpers import slow_pipelines as sp

ROOT = Path(__file__).resolve().parents[2]
# The smallest measurements the doctor takes (two repeats: the fewest compare can judge).
FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def test_optimize_returns_the_original_when_nothing_helps():
    model = sp.wide_tiny_model()
    model.compile(optimizer="adam", loss="mse")  # the loss comes from compile
    weights = [w.copy() for w in model.get_weights()]
    ds = sp.tuned_clean(128)  # already tuned: no rewrite applies, none is left to the noise
    out, report = tfperf.optimize(ds, model, overrides=[*FAST, "doctor.what_ifs=[]"])
    assert out is ds, str(report)
    assert report.kept == [] and report.speedup == 1.0
    assert "nothing helped" in str(report) and "original dataset is returned" in str(report)
    # str(report) opens with the verdict: how input-bound, the two rates, the side to work on
    first = " ".join(str(report).split())[:800]  # the headline, unwrapped
    diag = report.diagnosis
    if diag.inconsistent:  # the host's load swung: no verdict, and the report says why
        assert first.startswith("no verdict: the measurement is inconsistent ("), first
    else:
        assert first.startswith(f"verdict: {diag.verdict_text} ({diag.wait_text}"), first
        assert "work on the" in first, first
    assert "the pipeline alone gives" in first, first
    assert report.fix.trials  # candidates were tried, none kept
    # a rewrite that would change nothing (another prefetch, options already on) is not timed
    assert {t.reason for t in report.fix.trials} == {"not applicable"}, str(report)
    # the doctor trained clones: the user's model is as it was
    for a, b in zip(weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def heavy_per_example(batch_size: int = 32) -> tf.data.Dataset:
    """~600 us of ops per example in a sequential map: the clear bottleneck, also on a loaded
    host, where each pulled batch waits ~1 ms for a tf.data thread (~30 us per example that
    every stage prefix pays, the source's included: with ~100 us the source was once read as
    the slowest stage, and with ~300 us once beside three other test workers, at 114 us)."""
    return sp._slices().map(lambda x, y: (heavy_six(x), y)).batch(batch_size)


def heavy_six(x: tf.Tensor) -> tf.Tensor:
    """~600 us of small ops on one example (see heavy_per_example)."""
    for _ in range(6):
        x = sp.heavy_one(x)
    return x


def test_diagnose_a_dataset_and_model_without_a_run_file():
    ds = heavy_per_example()
    # Three repeats: a stage's cost is its prefix's median rate less the one before it, and
    # with two, one stalled repeat of the source's prefix (174 us per example, idle, in a
    # full suite) made the source the slowest stage; the median of three leaves it out.
    overrides = [*FAST, "doctor.repeats=3", "doctor.what_ifs=[]"]
    diag = tfperf.diagnose(ds, sp.tiny_model(), overrides=overrides)
    assert len(diag.pipeline.runs) == 3, diag.pipeline
    assert diag.source == "tf.data.Dataset" and diag.batch_size == 32
    assert [s.label.split()[0] for s in diag.stages] == ["source#0", "map#1", "batch#2"]
    assert all(s.examples_per_s and s.examples_per_s > 0 for s in diag.stages), diag.stages
    # The map, named from the graph. Which stage times as the slowest is not asserted here
    # (diagnosis/test_diagnose.py's no_cache case is): beside two CPU hogs, two stalled
    # repeats of the batch's prefix twice made the batch (~1,000 ex/s) look slower than the
    # map's prefix (~2,300).
    advice = next(f for f in diag.findings if f.code == "per_example_map")
    assert advice.stage.startswith("map#1"), advice


def test_diagnose_without_a_model_splits_the_label_and_judges_the_pipeline():
    x, y = sp.arrays()
    ds = tf.data.Dataset.from_tensor_slices({"x": x, "y": y})
    ds = ds.map(lambda e: {"x": heavy_six(e["x"]), "y": e["y"]}).batch(16)
    # Three repeats (as above): in a suite of four workers beside two CPU hogs, two stalled
    # rounds of the source's prefix once read the map's cost under 5% of the pipeline's time,
    # and neither map finding was made (its median of two rounds: their mean).
    diag = tfperf.diagnose(ds, label="y", overrides=[*FAST, "doctor.repeats=3"])
    assert diag.model == "stand_in" and diag.batch_size == 16
    # The planted map is named: vectorized (per_example_map) or, where the vectorize probe's
    # gain read within noise beside two CPU hogs, made parallel (sequential_map).
    named = [f for f in diag.findings if f.code in ("per_example_map", "sequential_map")]
    assert named and named[0].stage.startswith("map#"), diag.findings


def test_api_mistakes_are_user_errors():
    with pytest.raises(tfperf.UserError, match="expected a tf.data.Dataset"):
        tfperf.optimize([1, 2, 3])
    with pytest.raises(tfperf.UserError, match="label='z'"):
        tfperf.diagnose(tf.data.Dataset.from_tensor_slices({"x": [1.0]}), label="z")
    with pytest.raises(tfperf.UserError, match="unknown rewrite 'warp speed'"):
        tfperf.apply_rewrites(sp.fixable(), ["warp speed"])
    # a rewrite whose stage is gone: the pipeline changed since the doctor kept it
    with pytest.raises(tfperf.UserError, match="does not apply to this dataset"):
        tfperf.apply_rewrites(sp.clean(), ["batch before per-example map"])


def test_readme_example_runs(capsys, tmp_path):
    """The README's example, run in this process as a script; its `optimize` on a slow
    user pipeline is also where the speed-up and the replay are checked."""
    example = ROOT / "examples" / "optimize_pipeline.py"
    assert example.name in (ROOT / "README.md").read_text()
    # Its diagnose's budget of 30 s cut to 12 s: the test is about what the call returns, not
    # about 30 s measurements (at 5 s, beside two CPU hogs, the diagnosis had no time left for
    # the per-example finding). Its optimize keeps the example's 30 s: at 10, 15 and 20 s,
    # beside two hogs and the suite, a first trial (a prefetch, within the noise) took what
    # the diagnosis left, and nothing was kept. The script as written otherwise.
    code = example.read_text()
    assert code.count("budget_s=30") == 2, "the example's budgets changed: update this test"
    code = code.replace("budget_s=30", "budget_s=12", 1)
    script = tmp_path / example.name
    script.write_text(code)
    ran = runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    # The 12 s diagnosis names the planted map, or says its measurement was inconsistent (the
    # host's load swung between its rounds, beside two CPU hogs) rather than judge.
    assert "per_example_map" in out or "inconsistent measurement" in out, out
    # Its 30 s optimize keeps what it timed faster (beside two CPU hogs too: the budget above).
    assert "same examples: True" in out, out
    assert "kept: " in out, out
    report, fast = ran["report"], ran["fast"]
    assert report.kept, str(report)  # `fast` is the rewritten dataset, not the user's
    assert report.speedup > 1.0 and report.fix.confirmed
    assert "kept: " + ", ".join(report.kept) in str(report)
    # replaying the kept names on a fresh dataset gives the same pipeline
    again = tfperf.apply_rewrites(ran["make_dataset"](), report.kept)
    kinds = [s.kind for s in lint.read_graph(again).stages]
    assert kinds == [s.kind for s in lint.read_graph(fast).stages]
    assert same_examples(again, fast)


def test_a_small_budget_takes_shorter_measurements():
    from tfperf.doctor.api import doctor_settings

    assert doctor_settings(None) == {} and doctor_settings(60) == {} and doctor_settings(300) == {}
    assert doctor_settings(30) == {"steps": 15, "warmup": 2, "repeats": 2, "min_seconds": 0.25}
    tiny = doctor_settings(1)
    assert tiny["steps"] == 4 and tiny["warmup"] == 1 and tiny["repeats"] == 2  # the fewest


def test_elements_that_are_not_features_and_labels_are_a_user_error():
    with pytest.raises(tfperf.UserError, match=r"\(features, labels\) or"):
        tfperf.diagnose(tf.data.Dataset.range(8).batch(4))
    with pytest.raises(tfperf.UserError, match="expected a keras.Model"):
        tfperf.diagnose(tf.data.Dataset.from_tensor_slices(([1.0], [1.0])).batch(1), model=42)


def test_sample_weights_and_names_tensorflow_refuses_through_the_api():
    x = np.ones((64, 4), np.float32)
    weighted = tf.data.Dataset.from_tensor_slices((x, x[:, :1], x[:, 0])).batch(16)
    diag = tfperf.diagnose(weighted, overrides=[*FAST, "doctor.what_ifs=[]"], budget_s=20)
    assert diag.training.examples_per_s.median > 0  # (x, y, sample_weight) batches train
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)], name="m<x>")
    with pytest.raises(tfperf.UserError, match=r"model is named 'm<x>'.*refuses as a scope"):
        tfperf.diagnose(weighted, model, overrides=FAST)


def test_a_first_element_slower_than_the_budget_is_a_report_not_an_error():
    """Issue 30: optimize pulls one element to learn the batch size when the graph does not
    say it; an element slower than the whole budget is abandoned, and the report says the
    rates are not measured (no UserError, no hang, the original dataset back)."""
    import time

    def late():
        time.sleep(30)
        yield np.zeros((4, 3), np.float32), np.zeros(4, np.float32)

    spec = (tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec((None,), tf.float32))
    ds = tf.data.Dataset.from_generator(late, output_signature=spec)
    start = time.monotonic()
    out, report = tfperf.optimize(ds, None, budget_s=3)
    assert time.monotonic() - start < 20  # not the 30 s of the element
    assert out is ds and report.kept == []
    assert report.diagnosis.verdict.startswith("not measured")
    assert any("first element" in n and "abandoned" in n for n in report.diagnosis.notes)
    assert "not measured" in report.diagnosis.headline
    assert report.to_dict()["diagnosis"]["verdict"].startswith("not measured")


@pytest.mark.parametrize("keras_model", [False, True], ids=["stand-in", "keras"])
def test_an_element_slower_than_the_budget_left_is_a_not_measured_row(keras_model: bool):
    """Issue 30: the first element comes at once, every later one takes longer than the
    whole budget: the required rates' repeats are abandoned at the budget's end and the
    diagnosis says "not measured" for them, within the budget (+ its grace), no error; with
    a Keras model (its target built on the real first batch) as with the stand-in."""
    import time

    budget_s = 8.0
    pulled: list[int] = []

    def slow(x: tf.Tensor) -> tf.Tensor:
        def pull(v: np.ndarray) -> np.ndarray:
            pulled.append(1)
            if len(pulled) > 1:
                time.sleep(60)
            return v

        return tf.py_function(pull, [x], tf.int64)

    ds = (
        tf.data.Dataset.range(1_000)
        .shuffle(200_000_000)  # far beyond the RAM budget: a risk read from the graph
        .map(slow)
        .map(lambda v: (tf.fill([3], tf.cast(v, tf.float32)), tf.cast(v, tf.float32)))
        .batch(1, drop_remainder=True)
    )
    start = time.monotonic()
    model = None
    if keras_model:
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        model.compile(loss="mse")
    diag = tfperf.diagnose(ds, model, budget_s=budget_s, ram_budget_mb=64)
    took = time.monotonic() - start
    assert took < 45  # far from the 60 s of one element (a loose bound: a loaded host)
    assert diag.verdict.startswith("not measured"), diag.verdict
    said = [n for n in diag.notes if "not measured" in n]
    assert any(n.startswith("pipeline: ") for n in said), diag.notes
    assert "not measured" in str(diag) and diag.to_dict()["verdict"].startswith("not measured")
    # What needs no rate is still said: the shuffle buffer beyond the RAM budget.
    assert [f.code for f in diag.findings] == ["shuffle_over_budget"], diag.findings


def test_a_slow_large_pipeline_still_gets_its_top_candidate_checked_and_timed():
    """Issue 30: on a ~300 examples/s pipeline of 50,000 examples, budget_s=60 checks and
    times the candidate with the largest predicted gain first (its multiset check on a
    sample, its trial), whatever the others get; the call keeps near its budget."""
    import time

    def slow(x: tf.Tensor) -> tf.Tensor:
        return tf.py_function(lambda v: (time.sleep(0.003), v)[1], [x], tf.int64)

    ds = (
        tf.data.Dataset.range(50_000)
        .map(slow)
        .map(lambda v: (tf.fill([3], tf.cast(v, tf.float32)), tf.cast(v, tf.float32)))
        .batch(32)
    )
    start = time.monotonic()
    _, report = tfperf.optimize(ds, None, budget_s=60)
    took = time.monotonic() - start
    from tfperf.doctor.fix.candidates import ranking_gains

    trials = report.fix.trials
    # Tried in the order of the gain the diagnosis predicts for each (an unpredicted
    # vectorize ranked with the parallel maps).
    ranked = ranking_gains([t.name for t in trials], report.diagnosis)
    gains = [ranked[t.name] for t in trials]
    named = [(t.name, g) for t, g in zip(trials, gains, strict=True)]
    assert gains == sorted(gains, reverse=True), named
    assert gains[0] > 1.0, named
    # The first candidate that applies (vectorize may find nothing to vectorize) is checked
    # and timed before any is cut by the budget.
    timed = [i for i, t in enumerate(trials) if t.examples_per_s is not None]
    cut = [i for i, t in enumerate(trials) if t.reason.startswith(("not measured", "not verif"))]
    assert timed and (not cut or timed[0] < cut[0]), trials
    assert took < 60 * 1.1 + 15, took  # budget + 10%, and slack for a loaded host
