"""Fixtures of the run report's tests: a doctor's result as `tfperf doctor --fix --json`
prints it (its shape taken from a real run: two stages, two findings, a kept trial and one
that did not apply), and a run folder's TensorBoard logs written with tf.summary."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

DIAGNOSIS: dict[str, Any] = {
    "headline": "verdict: highly input-bound (input wait 97% of training)",
    "source": "user_pipe:make_dataset",
    "model": "sequential_1",
    "batch_size": 256,
    "precision": "float32",
    "verdict": "highly input-bound",
    "input_bound_fraction": 0.967,
    "pipeline": {"examples_per_s": 19107.0},
    "compute_limit": {"examples_per_s": 841156.3},
    "training": {"examples_per_s": 18896.2},
    "stages": [
        {"label": "flat_map#1 (files=2)", "examples_per_s": 99198.4, "us_per_example": 10.08},
        {"label": "map#2 (sequential)", "examples_per_s": 12652.6, "us_per_example": 68.95},
    ],
    "slowest_stage": "map#2 (sequential)",
    "findings": [
        {
            "code": "per_example_parse",
            "title": "Examples parsed one at a time before batch",
            "stage": "map#2 (sequential)",
            "evidence": "this stage adds 69.0 us per example (~100% of the pipeline's time)",
            "change": "batch first, then parse the whole batch with one tf.io.parse_example",
            "expected": "pipeline ~90,697 ex/s; training ~4.7x faster",
            "expected_speedup": 4.75,
        },
        {
            "code": "no_interleave",
            "title": "2 files read one after another",
            "stage": "flat_map#1 (files=2)",
            "evidence": "this stage adds 10.1 us per example",
            "change": "files.interleave(TFRecordDataset, num_parallel_calls=AUTOTUNE)",
            "expected": "training ~1.1x faster",
            "expected_speedup": 1.11,
        },
    ],
    "variants": {},
    "notes": [],
}
FIX: dict[str, Any] = {
    "before_examples_per_s": 27537.4,
    "after_examples_per_s": 105931.7,
    "predicted_speedup": 5.025,
    "check": {"ratio": 4.89, "low": 2.69, "high": 7.09, "verdict": "faster"},
    "trials": [
        {
            "change": "vectorize per-example maps",
            "examples_per_s": 228433.2,
            "kept": True,
            "reason": "faster",
            "ratio": 14.42,
            "low": 9.04,
            "high": 19.8,
            "predicted": 4.747,
            "findings": ["per_example_parse"],
        },
        {
            "change": "batch before per-example map",
            "examples_per_s": None,
            "kept": False,
            "reason": "not applicable",
            "ratio": None,
            "low": None,
            "high": None,
            "predicted": 1.0,
            "findings": ["per_example_parse"],
        },
    ],
    "written": ["/runs/run.optimized.yaml"],
}


@pytest.fixture
def diagnosis() -> dict[str, Any]:
    return copy.deepcopy(DIAGNOSIS)


@pytest.fixture
def fix() -> dict[str, Any]:
    return copy.deepcopy(FIX)


def write_scalars(log_dir: Path, series: dict[str, list[tuple[int, float]]]) -> Path:
    """TensorBoard event files in `log_dir` holding each tag's (step, value) points."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(log_dir))
    with writer.as_default():
        for tag, points in series.items():
            for step, value in points:
                tf.summary.scalar(tag, value, step=step)
    writer.close()
    return log_dir


@pytest.fixture
def scalars_writer():
    """write(log_dir, {tag: [(step, value), ...]}) -> log_dir, with real event files."""
    return write_scalars
