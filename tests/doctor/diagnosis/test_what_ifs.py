"""The doctor's what-ifs (doctor/diagnosis/what_ifs.py): the step under XLA timed on the user's
own model; the run's own steps per call (model.fit's steps_per_execution) timed beside the
compute limit and handed back as a compile keyword; a pipeline that ignores batch_size gets
no batch what-if (its batches are another size); the batch the pipeline really yields; XLA
not timed where the run compiles with it already."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
import yaml

import tfperf
from tfperf.config import config_from_dict, load_config
from tfperf.doctor import diagnose
from tfperf.doctor.diagnosis.what_ifs import real_batch, xla_already_on
from tfperf.doctor.evidence.evidence import STEPS_VARIANT, XLA_VARIANT

FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


PIPELINES = '''"""User pipelines for diagnosis/test_what_ifs.py."""

import keras
import numpy as np
import tensorflow as tf


def hard_coded_64(batch_size=32, **kwargs):
    # A user pipeline that ignores batch_size: always batches of 64.
    ds = tf.data.Dataset.from_tensor_slices(
        (np.ones([1024, 32], "float32"), np.ones([1024, 1], "float32"))
    )
    return ds.map(lambda x, y: (x * 2.0, y)).batch(64, drop_remainder=True)


def vector_model():
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(1)])
'''


def write_run(folder: Path, function: str, model: str, **extra: Any) -> Path:
    """`folder/<function>.yaml` naming `pipelines_what_ifs:<function>` and its model."""
    (folder / "pipelines_what_ifs.py").write_text(PIPELINES)
    run: dict[str, Any] = {
        "data": {"pipeline": f"pipelines_what_ifs:{function}"},
        "model": {"name": f"pipelines_what_ifs:{model}", "loss": "mse"},
        "pipeline": {"batch_size": 8},
        "doctor": {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []},
    }
    for key, value in extra.items():
        run[key].update(value)
    path = folder / f"{function}.yaml"
    path.write_text(yaml.safe_dump(run, sort_keys=False))
    return path


def test_a_pipeline_that_ignores_batch_size_gets_no_batch_what_if(tmp_path: Path):
    run = write_run(tmp_path, "hard_coded_64", "vector_model", doctor={"what_ifs": ["batch"]})
    diag = diagnose(load_config(run)).to_dict()
    assert diag["batch_size"] == 64  # the elements' leading dimension, not batch_size: 8
    assert not [v for v in diag["variants"] if "batch=" in v], diag["variants"]
    assert "small_batch" not in [f["code"] for f in diag["findings"]]
    assert any("ignores batch_size" in n for n in diag["notes"]), diag["notes"]


def test_the_doctor_times_the_step_under_xla_on_the_users_model(tmp_path: Path):
    """A model that sets the pace (batches from memory, two wide layers): the compute
    what-ifs run, XLA among them, on the user's own model. Its row in the rates table shows
    its rate with the span of its paired ratios, and the ratios, in every output."""
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
        row = diag.variants_shown[XLA_VARIANT]
        said = re.fullmatch(r"(\S+)x of \(b\) \((\S+)-(\S+)x\)", row["note"])
        assert said, row
        ratio, low, high = (float(v) for v in said.groups())
        limit = diag.compute.examples_per_s.median
        assert low <= ratio <= high and diag.variants[XLA_VARIANT] == pytest.approx(
            limit * ratio, rel=0.01
        ), (row, limit)
        # the span is the limit's median at the least and the most paired ratio (said to 0.01)
        figures = [float(v.replace(",", "")) for v in re.findall(r"[\d,.]+", row["text"])]
        expected = [diag.variants[XLA_VARIANT], limit * low, limit * high]
        assert figures == pytest.approx(expected, rel=0.01), (row, limit)
        text = str(diag)
        assert row["text"] in text and row["note"] in text, text
        assert diag.to_dict()["variants_shown"][XLA_VARIANT] == row
        page = diag.to_html(tmp_path / "doctor.html").read_text()
        assert html.escape(row["text"]) in page and html.escape(row["note"]) in page
        caption = diag.variants_caption
        assert caption and caption in " ".join(text.split()) and html.escape(caption) in page


# doctor.steps=20: the compute limit's steps per call, the keyword handed back for model.fit.
# Repeats of at least 0.25 s: at 0.1 s one stalled pair beside two CPU hogs once took the
# paired ratios' maximum above 1, and the finding was withheld as within the noise.
FIT_FAST = ["doctor.steps=20", "doctor.warmup=2", "doctor.repeats=3", "doctor.min_seconds=0.25"]


def test_a_fit_model_at_one_step_per_call_gets_steps_per_execution_measured():
    """A tiny model whose step is mostly dispatch, compiled as model.fit compiles it by
    default (steps_per_execution=1): the steps what-if is timed on it beside the compute
    limit, and a measured finding comes back as a compile keyword."""
    import keras

    x = tf.random.normal([32, 8])
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat(4000).prefetch(8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    overrides = [*FIT_FAST, "doctor.what_ifs=[steps]"]
    _, report = tfperf.optimize(ds, model, overrides=overrides, budget_s=60)
    diag = report.diagnosis
    assert f"{STEPS_VARIANT}1" in diag.variants, (diag.variants, diag.notes)
    # one step per call is several times slower for a step this small (5x measured)
    assert [f.code for f in diag.findings if f.code == "steps_per_call"], diag.variants
    assert report.compile_kwargs.get("steps_per_execution") == 20
    assert "model.compile(..., steps_per_execution=20)" in str(report)


def test_the_batch_is_what_the_pipeline_yields():
    assert real_batch(tf.data.Dataset.range(64).batch(8, drop_remainder=True)) == 8
    # Not known from the spec (a last partial batch is possible): the first element's.
    assert real_batch(tf.data.Dataset.range(64).batch(16)) == 16
    pairs = tf.data.Dataset.from_tensor_slices((tf.ones([20, 3]), tf.ones([20]))).batch(5)
    assert real_batch(pairs) == 5


def test_xla_is_not_timed_again_where_the_run_compiles_with_it():
    assert xla_already_on(config_from_dict({"train": {"jit_compile": True}}))
    assert not xla_already_on(config_from_dict({"train": {"jit_compile": False}}))
    # auto: XLA on an accelerator only
    auto = config_from_dict({"train": {"jit_compile": "auto"}})
    on_accelerator = any(d.device_type != "CPU" for d in tf.config.list_physical_devices())
    assert xla_already_on(auto) == on_accelerator
