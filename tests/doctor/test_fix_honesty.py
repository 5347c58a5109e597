"""What --fix reports is what happened (issue 19, section 2): a map the vectorizer refuses is
reported as a parallel map with the vectorizer's reason, never kept as "vectorize"; each
trial's rate stands beside the best-so-far rate of the same paired repeats, so its ratio
agrees with its numbers; each code edit quotes the line of the user's function it names
and mentions parse_single_example only where the function calls it."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console

import tfperf
from tfperf.doctor.fix.candidates import dataset_candidates
from tfperf.doctor.fix.pipeline_file import code_edits
from tfperf.doctor.fix.trials import FixResult, FixTrial, Skipped, rate_text, run_trial
from tfperf.doctor.graph import lint
from tfperf.doctor.report.render import render_fix
from tfperf.doctor.rules.parallel import MAP_OPTIONS, PARALLEL_MAPS
from tfperf.doctor.rules.per_example import VECTORIZE
from tfperf.measure import pipeline_probe


def _pngs(n: int = 24) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [
        tf.io.encode_png(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).numpy() for _ in range(n)
    ]


def test_a_map_the_vectorizer_refuses_is_reported_as_a_parallel_map():
    ds = tf.data.Dataset.from_tensor_slices(_pngs()).map(lambda b: tf.io.decode_png(b))
    ds = ds.batch(8)
    graph = lint.read_graph(ds)
    cands = dict(dataset_candidates(graph, ds, None))
    # Nothing vectorized: the fallback (the map made parallel) is not offered as vectorizing.
    with pytest.raises(
        Skipped, match=r"nothing vectorized: map#1 \(sequential\) stays per-example: .*DecodePng"
    ):
        cands[VECTORIZE.label](ds, graph)
    # The candidates that make it parallel say so, with the vectorizer's reason.
    for label in (MAP_OPTIONS.label, PARALLEL_MAPS.label):
        out = cands[label](ds, graph)
        assert out is not None
        said = "parallel map#1: the vectorizer failed: the map decodes images one at a time"
        assert f"{said} (DecodePng)" in out.doctor_note, out.doctor_note


def test_a_python_map_is_noted_only_where_it_really_runs_in_parallel():
    def double(x):
        return tf.numpy_function(lambda v: v * 2, [x], tf.int64)

    ds = tf.data.Dataset.range(64).map(double).batch(8)
    graph = lint.read_graph(ds)
    cands = dict(dataset_candidates(graph, ds, None))
    with pytest.raises(Skipped, match="nothing vectorized"):
        cands[VECTORIZE.label](ds, graph)
    parallel = cands[PARALLEL_MAPS.label](ds, graph)
    assert "parallel map#1: the vectorizer failed: the map calls a Python function" in (
        parallel.doctor_note
    )
    # tf.data's map_parallelization option leaves a stateful map sequential: no such claim.
    options = cands[MAP_OPTIONS.label](ds, graph)
    assert not getattr(options, "doctor_note", "")


def test_a_partly_vectorized_pipeline_is_still_vectorize_and_names_what_stayed():
    def decode(b):
        return tf.ensure_shape(tf.io.decode_png(b, channels=3), [8, 8, 3])

    ds = tf.data.Dataset.from_tensor_slices(_pngs()).map(decode)
    ds = ds.map(lambda img: img // 2).batch(8)
    graph = lint.read_graph(ds)
    out = dict(dataset_candidates(graph, ds, None))[VECTORIZE.label](ds, graph)
    assert out is not None and "map#1 (sequential) stays per-example" in out.doctor_note


def _slow(n: int) -> tf.data.Dataset:
    """Batches of a per-example map costing ~a matrix product each: slow, and the same
    pipeline batched first (one product per batch) several times faster."""
    m = tf.random.stateless_normal([64, 64], seed=[1, 2])

    def work(x):
        return tf.reduce_sum(tf.matmul(m, m) * tf.cast(x, tf.float32))

    return tf.data.Dataset.range(n).map(work).batch(16)


def test_each_trial_shows_the_rate_its_ratio_is_measured_against():
    slow = _slow(4096)
    fast = tf.data.Dataset.range(4096).batch(16)
    trials: list[FixTrial] = []

    def build():
        # Repeats of at least 0.3 s: a loaded host's stalls average out over a pair.
        current = pipeline_probe(
            "best so far", slow.repeat(), batches=20, warmup=2, min_seconds=0.3
        )
        candidate = pipeline_probe("fast", fast.repeat(), batches=20, warmup=2, min_seconds=0.3)
        return fast, current, candidate

    kept = run_trial("fast", "fast", build, SimpleNamespace(repeats=3), lambda _: None, trials)
    (t,) = trials
    assert kept is fast and t.kept
    # Kept: every paired ratio above 1, so its median rate is above the baseline's.
    assert t.baseline is not None and t.examples_per_s > t.baseline
    assert t.ratio > 1 and t.low > 1
    result = FixResult(1000.0, 2000.0, trials, [])
    out = io.StringIO()
    render_fix(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "vs best so far" in text and f" vs {rate_text(t.baseline, t.baseline_range)}" in text


VECTORIZED_PIPELINE = """import tensorflow as tf


def make_dataset(files, batch_size=32):
    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(lambda r: tf.strings.length(r) * 2)
    return ds.batch(batch_size)
"""

PARSED_PIPELINE = """import tensorflow as tf

SPEC = {"x": tf.io.FixedLenFeature([4], tf.float32)}


def make_dataset(files, batch_size=32):
    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(lambda r: tf.io.parse_single_example(r, SPEC)["x"])
    return ds.batch(batch_size)
"""


def test_each_code_edit_quotes_a_line_of_the_users_function(tmp_path):
    (tmp_path / "lengths_pipe.py").write_text(VECTORIZED_PIPELINE)
    cfg = tfperf.config_from_dict(
        {"data": {"pipeline": f"{tmp_path}/lengths_pipe.py:make_dataset"}}
    )
    names = [VECTORIZE.label, "prefetch at the end", "parallel batch", "gather per batch"]
    lines = VECTORIZED_PIPELINE.splitlines()
    for edit in code_edits(cfg, names):
        quoted = edit.rsplit("(the line: `", 1)[1].rstrip(")").rstrip("`")
        line = int(edit.split(f"{tmp_path / 'lengths_pipe.py'}:", 1)[1].split(":", 1)[0])
        assert lines[line - 1].strip() == quoted, edit
    (vectorize,) = code_edits(cfg, [VECTORIZE.label])
    # The function parses nothing: no parse_single_example in its edit.
    assert ":6: batch first" in vectorize and "parse" not in vectorize, vectorize
    assert "`ds = ds.map(lambda r: tf.strings.length(r) * 2)`" in vectorize


def test_the_parse_edit_names_the_parse_the_function_calls(tmp_path):
    (tmp_path / "parsed_pipe.py").write_text(PARSED_PIPELINE)
    cfg = tfperf.config_from_dict({"data": {"pipeline": f"{tmp_path}/parsed_pipe.py:make_dataset"}})
    (edit,) = code_edits(cfg, [VECTORIZE.label])
    assert "tf.io.parse_example instead of the tf.io.parse_single_example of line 8" in edit
    assert '`ds = ds.map(lambda r: tf.io.parse_single_example(r, SPEC)["x"])`' in edit
