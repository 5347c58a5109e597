"""inputs/workload_data.py: a built-in workload's data written as splits train and eval (from
another seed), with its offline step, plus raw splits when its original pipeline reads raw
rows; the offline step sent to convert's workers as a factory they rebuild when the workload
is a built-in one; and `convert --workload X --resume` keeping finished splits (their shards
are not rewritten)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf

from tfperf.data.convert.options import PreprocessFactory
from tfperf.data.manifest import load_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.inputs.workload_data import (
    EVAL_SEED_OFFSET,
    offline_preprocess_ref,
    workload_offline_step,
    write_workload_data,
)
from tfperf.workloads import get_workload
from tfperf.workloads.base import Workload


class Doubling(Workload):
    """Rows x = seed, seed + 1, ...; its offline step adds x2 = 2x; its original reads raw."""

    name = "doubling"
    original_needs_raw = True

    def raw_schema(self) -> Schema:
        return Schema.of(Feature(name="x", dtype="int64"))

    def schema(self) -> Schema:
        return Schema.of(Feature(name="x", dtype="int64"), Feature(name="x2", dtype="int64"))

    def generate(self, n: int, seed: int = 0) -> Iterator[dict]:
        for i in range(n):
            yield {"x": np.int64(seed + i)}

    def offline_preprocess(self):
        return lambda row: {**row, "x2": row["x"] * 2}


def _rows(out, manifest, split: str) -> list[dict[str, int]]:
    schema = manifest.split_schema(split)
    files = manifest.readable_shard_paths(out, split)
    return [
        {k: int(v) for k, v in schema.parse_one(r).items()} for r in tf.data.TFRecordDataset(files)
    ]


def test_train_eval_and_raw_splits_are_written(tmp_path):
    out = tmp_path / "data"
    manifest = write_workload_data(
        Doubling(), out, examples=6, eval_examples=3, seed=10, progress=False, workers=1
    )
    assert {k: v.records for k, v in manifest.splits.items()} == {
        "train": 6, "eval": 3, "train_raw": 6, "eval_raw": 3,
    }  # fmt: skip
    assert load_manifest(out).splits.keys() == manifest.splits.keys()
    train = sorted(_rows(out, manifest, "train"), key=lambda r: r["x"])
    assert train == [{"x": 10 + i, "x2": 20 + 2 * i} for i in range(6)]
    evals = sorted(r["x"] for r in _rows(out, manifest, "eval"))
    assert evals == [10 + EVAL_SEED_OFFSET + i for i in range(3)]  # never a training row
    assert sorted(_rows(out, manifest, "train_raw"), key=lambda r: r["x"])[0] == {"x": 10}


def test_no_examples_at_all_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="examples and eval_examples are both 0"):
        write_workload_data(Doubling(), tmp_path, examples=0, eval_examples=0, progress=False)


def test_a_built_in_workloads_offline_step_is_rebuilt_by_name():
    deblur = get_workload("deblur", patch=16)
    ref = offline_preprocess_ref(deblur)
    assert isinstance(ref, PreprocessFactory)
    assert ref.kwargs == {"name": "deblur", "options": deblur.options}
    assert (
        "workload deblur: offline_preprocess(" in ref.description and "patch=16" in ref.description
    )
    assert callable(ref.build()) and callable(workload_offline_step("deblur", {"patch": 16}))
    assert offline_preprocess_ref(get_workload("chess")) is None  # no offline step
    own = Doubling()
    assert not isinstance(offline_preprocess_ref(own), PreprocessFactory)  # not built in
    assert offline_preprocess_ref(own)({"x": 3}) == {"x": 3, "x2": 6}


def _shards(out) -> dict[str, tuple[int, int]]:
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(out.iterdir())
        if ".tfrecord-" in p.name
    }


def test_workload_resume_keeps_finished_shards(tmp_path, cli):
    out = tmp_path / "chess"
    args = ["convert", "--workload", "chess", "--examples", "300", "--eval-examples", "60"]
    args += ["--shard-size", "8KiB", "--workers", "1", "--out", out, "--quiet"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    before = _shards(out)
    assert len(before) > 2
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert _shards(out) == before  # not one shard rewritten
    # A half-written split: its finished shards stay, the rest is written.
    victim = sorted(p for p in out.iterdir() if "-train.tfrecord-" in p.name)[-1]
    victim.unlink()
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    kept = {k: v for k, v in _shards(out).items() if "-eval" in k}
    assert kept == {k: v for k, v in before.items() if "-eval" in k}
    assert os.path.exists(victim)
