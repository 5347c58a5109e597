"""The doctor's static lint of tf.data graphs, and its findings on a suite of deliberately
slow pipelines (tests/helpers/slow_pipelines.py): each names its own problem first."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.diagnosis.diagnose import diagnose
from tfperf.doctor.graph import lint
from tfperf.observe.feed import verdict_for

from helpers import slow_pipelines as sp

# Input cases time no compute what-ifs (their rules are tested on their own below).
FAST = {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []}


def run_cfg(name: str, model: str = "tiny_model", data_dir: str | None = None, **sections):
    data = {"pipeline": f"helpers.slow_pipelines:{name}"}
    if data_dir:
        data["dir"] = data_dir
    cfg = {
        "data": data,
        "model": {"name": f"helpers.slow_pipelines:{model}", "loss": "mse"},
        "pipeline": {"batch_size": 32},
        "doctor": dict(FAST),
    }
    for key, value in sections.items():
        cfg.setdefault(key, {}).update(value)
    return config_from_dict(cfg)


# ---- static lint ----------------------------------------------------------------------------
def test_chain_reads_ops_settings_and_functions():
    ds = (
        tf.data.Dataset.range(64)
        .shuffle(10)
        .map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64))
        .map(lambda x: tf.cast(x, tf.float64), num_parallel_calls=3, deterministic=True)
        .batch(8)
        .prefetch(2)
    )
    g = lint.read_graph(ds)
    kinds = [s.kind for s in g.stages]
    assert kinds == ["source", "shuffle", "map", "map", "batch", "prefetch"]
    shuffle, pymap, castmap, batch, prefetch = g.stages[1:]
    assert shuffle.buffer_size == 10
    assert pymap.parallelism is None and pymap.has_py_func
    assert castmap.parallelism == 3 and castmap.deterministic == "true"
    assert not castmap.has_py_func and castmap.output_dtypes == ["float64"]
    assert batch.batch_size == 8 and batch.batched and not castmap.batched
    assert prefetch.buffer_size == 2
    assert g.batch_size == 8
    assert lint.float64_outputs(g) == ["element"]


def test_parse_files_generator_and_autotune(tmp_path):
    files = sp.write_records(tmp_path, files=3, n=30)
    seq = lint.read_graph(
        tf.data.TFRecordDataset(files).map(lambda s: tf.io.parse_single_example(s, sp.SPEC))
    )
    read, parse = seq.stages[-2:]
    assert read.kind == "flat_map" and read.reads_files and read.files == 3
    assert parse.has_parse and not parse.batched
    par = lint.read_graph(
        tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE
        )
    )
    assert par.stages[-1].kind == "interleave" and par.stages[-1].parallelism == lint.AUTOTUNE
    gen = lint.read_graph(sp.from_generator(8))
    assert any(s.is_generator for s in gen.stages)


def test_prefix_dataset_yields_the_prefix_elements():
    ds = tf.data.Dataset.range(10).map(lambda x: x * 3).batch(4).map(lambda b: b + 1)
    g = lint.read_graph(ds)
    after_first_map = lint.prefix_dataset(g, g.stages[1])
    assert [int(v) for v in after_first_map] == [x * 3 for x in range(10)]
    whole = lint.prefix_dataset(g, g.stages[-1])
    assert [list(v.numpy()) for v in whole] == [list(v.numpy()) for v in ds]


def test_deterministic_prefix_stops_at_randomness():
    ds = (
        tf.data.Dataset.range(10)
        .map(lambda x: x + 1)
        .map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64))
        .batch(2)
    )
    g = lint.read_graph(ds)
    assert [s.kind for s in lint.deterministic_prefix(g)] == ["source", "map"]


def test_verdict_thresholds():
    assert verdict_for(0.25) == "highly input-bound"
    assert verdict_for(0.20) == "highly input-bound"
    assert verdict_for(0.07) == "moderately input-bound"
    assert verdict_for(0.01) == "not input-bound"


# ---- one slow pipeline per finding: the doctor names it first --------------------------------
CASES = [
    ("py_function", "py_function", {}),
    ("per_example_parse", "per_example_parse", {}),
    ("per_example_map", "per_example_map", {}),
    ("sequential_map", "sequential_map", {}),
    ("no_prefetch", "no_prefetch", {}),
    ("no_cache", "no_cache", {}),
    ("no_interleave", "no_interleave", {}),
    ("deterministic", "deterministic", {}),
    ("from_generator", "from_generator", {}),
    ("float64", "float64", {}),
    ("shuffle_over_budget", "shuffle_over_budget", {"pipeline": {"shuffle_ram_mb": 0.1}}),
]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("records")
    sp.write_records(root)
    return str(root)


@pytest.fixture(scope="module")
def diagnosed(records):
    """diagnosed(name, model, sections): the diagnosis of run_cfg(name, model, ...) on the
    records, measured once in this module; the tests reading the same run share it."""
    done: dict[str, Any] = {}

    def get(name: str, model: str = "tiny_model", sections: dict | None = None) -> Any:
        key = repr((name, model, sorted((sections or {}).items())))
        if key not in done:
            done[key] = diagnose(run_cfg(name, model, data_dir=records, **(sections or {})))
        return done[key]

    return get


@pytest.mark.parametrize(("pipeline", "code", "extra"), CASES, ids=[c[0] for c in CASES])
def test_slow_pipeline_named_first(pipeline, code, extra, diagnosed):
    model = "wide_tiny_model" if pipeline == "shuffle_over_budget" else "tiny_model"
    check_named_first(diagnosed(pipeline, model, extra), code)


# The compute-side findings: a well-fed model that a bigger batch or another precision helps.
# Each model's step has a fixed cost (a sleep), so the other core's load cannot make the
# cheap input look like the limit.
COMPUTE_CASES = [
    ("small_batch", "clean", "step_cost_model", 2, ["batch"]),
    ("precision", "wide_clean", "float32_slow_model", 64, ["precision"]),
]


@pytest.mark.parametrize(
    ("code", "pipeline", "model", "batch", "what_ifs"),
    COMPUTE_CASES,
    ids=[c[0] for c in COMPUTE_CASES],
)
def test_compute_finding_named_first(code, pipeline, model, batch, what_ifs):
    cfg = run_cfg(pipeline, model, pipeline={"batch_size": batch}, doctor={"what_ifs": what_ifs})
    diag = check_named_first(diagnose(cfg), code)
    assert diag.findings[0].kind == "compute" and diag.findings[0].expected_speedup > 1


def check_named_first(diag, code):
    assert diag.findings, f"no findings; verdict {diag.verdict}; variants {diag.variants}"
    first = diag.findings[0]
    assert first.code == code, [f.code for f in diag.findings]
    assert first.evidence and first.change and first.expected
    if first.kind == "input":
        assert diag.verdict != "not input-bound"
    # every measurement is a real positive number
    assert diag.pipeline.examples_per_s.median > 0 and diag.compute.examples_per_s.median > 0
    assert 0.0 <= diag.input_bound_fraction <= 1.0
    return diag


def test_input_bound_pipeline_reports_slowest_stage(diagnosed):
    diag = diagnosed("no_cache")
    assert diag.verdict == "highly input-bound"
    assert diag.slowest_stage is not None and diag.slowest_stage.startswith("map#")
    d = diag.to_dict()
    assert d["findings"][0]["code"] == "no_cache"
    assert {"pipeline", "compute_limit", "training", "stages"} <= set(d)


def test_float64_measured_against_float32_inputs(diagnosed):
    diag = diagnosed("float64")  # no compute what-ifs (FAST)
    assert "float32 inputs" in diag.variants and diag.variants["float32 inputs"] > 0
    f = next(f for f in diag.findings if f.code == "float64")
    assert "features" in f.evidence


def test_dataset_argument_replaces_the_run_file_pipeline():
    x = np.ones((64, sp.DIM), "float32")
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(16).map(lambda a, b: (a * 2, b))
    cfg = run_cfg("clean")
    diag = diagnose(cfg, dataset=ds)
    assert diag.batch_size == 16
    assert any(f.code == "no_prefetch" for f in diag.findings) or diag.verdict == "not input-bound"


# ---- what a resume loses: an iterator TensorFlow cannot save -----------------------------------
def test_iterator_that_cannot_be_checkpointed_is_a_finding(diagnosed, evidence):
    from tfperf.doctor.rules.model import rule_input_not_checkpointable

    diag = diagnosed("from_generator")
    f = next(f for f in diag.findings if f.code == "input_not_checkpointable")
    assert "from_generator" in f.evidence and "PyFunc is stateful" in f.evidence
    assert (
        "train.checkpoint_input=false" in f.change and "restarts the input pipeline" in f.expected
    )
    assert f.kind == "resume" and f.expected_speedup is None
    # Stateful randomness too; seeded stateless randomness and TF ops are saved.
    noisy = tf.data.Dataset.range(8).map(lambda x: tf.random.uniform([]) + tf.cast(x, tf.float32))
    (found,) = rule_input_not_checkpointable(evidence(noisy))
    assert "RandomUniform is stateful" in found.evidence and found.stage.startswith("map#")
    seeded = tf.data.Dataset.range(8).map(
        lambda x: tf.random.stateless_uniform([], seed=[1, 2]) + tf.cast(x, tf.float32)
    )
    assert rule_input_not_checkpointable(evidence(seeded.shuffle(4).batch(2))) == []
